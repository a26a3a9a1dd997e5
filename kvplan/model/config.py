"""Raw Hugging Face config.json → ModelSpec. Every family quirk lives here, named.

Lenient on input (unknown keys are ignored), strict on what the math needs: a missing or
ill-typed required field raises InvalidConfigError naming the file and the field.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..errors import InvalidConfigError
from ..limits import (
    MAX_CONFIG_BYTES,
    MAX_LAYERS,
    contained,
    loads_json,
    model_root,
    read_limited,
    short,
)
from ..specs import (
    AudioEncoderSpec,
    LinearAttentionSpec,
    MlaSpec,
    ModelSpec,
    MoeSpec,
    Problem,
    QuantSpec,
    VisionSpec,
)
from ..units import DTYPE_ALIASES
from .multimodal import PHI3V_PROFILE_IMAGE, max_tokens_per_image, phi3v_tokens

# Keys vLLM reads for the default max_model_len (vllm/config/model.py
# `_get_and_verify_max_len`, 0.33.0): the minimum over those present.
MAX_LEN_KEYS = (
    "max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
    "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len",
)

# Families whose weights and attention kvplan models layer by layer.
LLAMA_LIKE = {"llama", "mistral", "qwen2", "qwen3", "phi3", "yi", "internlm2"}
MOE_FAMILIES = {"mixtral", "qwen3_moe", "qwen2_moe"}
KNOWN_FAMILIES = LLAMA_LIKE | MOE_FAMILIES | {
    "chatglm", "glm", "gemma2", "gemma3", "gpt_oss", "deepseek_v2", "deepseek_v3", "kimi_k2",
    "qwen3_next", "llama4", "jamba", "bamba", "nemotron_h", "phi", "glm4_moe", "minimax_m2"}
# llama-variant families (fam-b): Llama-shaped decoders whose differences (norms, biases, tied
# heads, q/k norms, experts, sliding layers, RoPE/ALiBi) _llama_variant applies to the spec.
LLAMA_VARIANT_FAMILIES = {
    "gemma", "cohere", "cohere2", "olmo", "olmo2", "granite", "granitemoe", "granitemoeshared",
    "internlm", "internlm3", "baichuan", "exaone", "minicpm", "phimoe", "minicpm3"}
KNOWN_FAMILIES |= LLAMA_VARIANT_FAMILIES
# Phi-1 / 1.5 / 2 (transformers PhiModel; vllm/model_executor/models/phi.py): one LayerNorm
# (weight + bias) feeds attention and MLP in parallel; q/k/v and dense carry biases; the MLP is
# fc1 → gelu → fc2 with biases (not gated); the final LayerNorm and the LM head carry biases.
BIASED_LAYERNORM_FAMILIES = {"phi"}
# decoder families (fam-a): GPT-2-style and parallel-block decoders with LayerNorms, learned or
# ALiBi positions and non-gated MLPs, read by _fam_a_layout (each as vLLM v0.11 builds it).
FALCON_TYPES = {"falcon", "RefinedWeb", "RefinedWebModel"}  # RW*: the pre-transformers configs
FAM_A_FAMILIES = {"gpt2", "gpt_bigcode", "gptj", "gpt_neox", "falcon", "starcoder2", "opt",
                  "bloom", "mpt"}
KNOWN_FAMILIES |= FAM_A_FAMILIES
# encoder-decoder speech models (fam-c): read by _whisper_layout.
KNOWN_FAMILIES |= {"whisper"}


def load_config_file(path: Path) -> dict[str, Any]:
    """Read a config.json, with errors that name the file and the line."""
    data = loads_json(read_limited(path, MAX_CONFIG_BYTES, what="model config"), where=str(path))
    if not isinstance(data, dict):
        raise InvalidConfigError("expected a JSON object at the top level", path=str(path))
    return data


# Upper bounds of config integers (a bound, not a guess: each is far above every published
# model, and keeps every derived byte count well inside int64). Fields not named: INT_MAX.
FIELD_MAX = {
    "num_hidden_layers": MAX_LAYERS, "n_layer": MAX_LAYERS, "num_layers": MAX_LAYERS,
    "num_attention_heads": 2**14, "n_head": 2**14, "hidden_size": 2**18, "n_embd": 2**18,
    "vocab_size": 2**24, "padded_vocab_size": 2**24, "head_dim": 2**14, "attention_head_dim": 2**14,
    "kv_channels": 2**14, "intermediate_size": 2**20, "ffn_hidden_size": 2**20,
    "intermediate_size_mlp": 2**20, "moe_intermediate_size": 2**20,
    "num_local_experts": 2**12, "num_experts": 2**12, "n_routed_experts": 2**12,
    **{k: 2**34 for k in MAX_LEN_KEYS}, "sliding_window": 2**34, "attention_chunk_size": 2**34,
    "original_max_position_embeddings": 2**34,
    "n_layers": MAX_LAYERS, "n_heads": 2**14, "d_model": 2**18, "n_inner": 2**20, "ffn_dim": 2**20,
    "word_embed_proj_dim": 2**18, "rotary_dim": 2**14, "kv_n_heads": 2**14,  # fam-a
    "num_crops": 64, "image_dim_out": 2**16, "num_img_tokens": 2**16,  # fam-c: phi3_v
    "encoder_layers": MAX_LAYERS, "decoder_layers": MAX_LAYERS,  # fam-c: whisper
    "encoder_attention_heads": 2**14, "decoder_attention_heads": 2**14,
    "encoder_ffn_dim": 2**20, "decoder_ffn_dim": 2**20, "num_mel_bins": 2**12,
    "max_source_positions": 2**20,
}
INT_MAX = 2**24
# Fields that are divisors, counts or periods: 0 is as impossible as a negative.
POSITIVE = {
    "num_hidden_layers", "n_layer", "num_layers", "num_attention_heads", "n_head", "hidden_size",
    "n_embd", "vocab_size", "padded_vocab_size", "head_dim", "attention_head_dim", "kv_channels",
    "n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num",
    "num_attention_groups", "num_local_experts", "num_experts", "n_routed_experts",
    "num_experts_per_tok", "experts_per_token", "decoder_sparse_step", "moe_layer_freq",
    "interleave_moe_layer_step", "expert_layer_period", "sliding_window_pattern",
    "_sliding_window_pattern", "full_attention_interval", "attn_layer_period", "mamba_n_heads",
    "mamba_num_heads", "mamba_head_dim", "mamba_d_head", "linear_num_key_heads",
    "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim", "moe_intermediate_size",
    "kv_lora_rank", "qk_rope_head_dim", "v_head_dim", "mamba_expand", "mamba_d_state",
    "ssm_state_size", "sliding_window", "attention_chunk_size", *MAX_LEN_KEYS,
    "n_layers", "n_heads", "d_model", "ffn_dim", "word_embed_proj_dim", "kv_n_heads",  # fam-a
    "num_crops", "image_dim_out", "num_img_tokens",  # fam-c: phi3_v
    "encoder_layers", "decoder_layers", "encoder_attention_heads", "decoder_attention_heads",
    "encoder_ffn_dim", "decoder_ffn_dim", "num_mel_bins", "max_source_positions",  # whisper
}


class _Reader:
    """Typed access to config fields, raising errors that name the file and the field.

    Integers must be JSON integers (a numeric string such as "131072" is refused: vLLM
    compares these fields with numbers and fails on a string), within [0 or 1, FIELD_MAX]."""

    def __init__(self, cfg: dict[str, Any], path: str) -> None:
        self.cfg = cfg
        self.path = path

    def check_int(self, key: str, value: Any, where: str | None = None) -> int:
        name = where or key
        lo = 1 if key in POSITIVE else 0
        hi = FIELD_MAX.get(key, INT_MAX)
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidConfigError(f"expected an integer, got {short(value)}", path=self.path,
                                     field=name, hint="write the number without quotes")
        if not lo <= value <= hi:
            raise InvalidConfigError(f"expected an integer from {lo} to {hi:,}, got {short(value)}",
                                     path=self.path, field=name)
        return value

    def opt_int(self, key: str, default: Any = None) -> Any:
        """The field when present (validated), else `default` (not validated)."""
        value = self.cfg.get(key)
        return default if value is None else self.check_int(key, value)

    def float(self, key: str, *, lo: float, hi: float) -> float | None:
        value = self.cfg.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                math.isfinite(value) and lo < value <= hi):
            raise InvalidConfigError(f"expected a number in ({lo:g}, {hi:g}], got {short(value)}",
                                     path=self.path, field=key)
        return float(value)

    def int_list(self, key: str) -> list[int]:
        value = self.cfg.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or len(value) > 4 * MAX_LAYERS or not all(
                isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= INT_MAX for v in value):
            raise InvalidConfigError(f"expected a list of non-negative integers, got {short(value)}",
                                     path=self.path, field=key)
        return value

    def int(self, *keys: str, default: int | None = None, required: bool = True) -> int | None:
        for key in keys:
            if key in self.cfg and self.cfg[key] is not None:
                return self.check_int(key, self.cfg[key])
        if default is not None or not required:
            return default
        raise InvalidConfigError(
            "missing (needed to size the model)", path=self.path, field=" or ".join(keys),
            hint="kvplan needs the model's own config.json with its architecture fields",
        )

    def bool(self, key: str, default: bool) -> bool:
        value = self.cfg.get(key, default)
        return bool(value) if value is not None else default


def _architectures(raw: dict[str, Any], path: str) -> list[str]:
    value = raw.get("architectures") or []
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise InvalidConfigError(f"expected a list of class names, got {short(value)}", path=path,
                                 field="architectures")
    return value


def _ssm_dtype(cfg: dict[str, Any], path: str) -> str:
    raw = cfg.get("mamba_ssm_cache_dtype") or "float32"
    dtype = DTYPE_ALIASES.get(str(raw).lower().replace("torch.", ""))
    if dtype is None:
        raise InvalidConfigError(f"unknown dtype {short(raw)}", path=path, field="mamba_ssm_cache_dtype")
    return dtype


def _names(value: Any, path: str, field: str) -> list[str]:
    """A list of module names (or patterns) from a quantization config."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidConfigError(f"expected a list of module names, got {short(value)}", path=path,
                                 field=field)
    return value


def _block(value: Any, path: str, field: str) -> tuple[int, int] | None:
    """A [rows, cols] block of a block-wise quantization scale."""
    if not value:
        return None
    if not (isinstance(value, list) and len(value) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 2**16 for v in value)):
        raise InvalidConfigError(f"expected [rows, cols] of positive integers, got {short(value)}",
                                 path=path, field=field)
    return value[0], value[1]


def _group(value: Any, path: str, field: str, default: int | None) -> int | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not (value == -1 or 1 <= value <= 2**20):
        raise InvalidConfigError(f"expected a positive group size (or -1), got {short(value)}",
                                 path=path, field=field)
    return value


def _dtype(cfg: dict[str, Any], path: str) -> str:
    raw = cfg.get("torch_dtype") or cfg.get("dtype") or "float32"
    dtype = DTYPE_ALIASES.get(str(raw).lower().replace("torch.", ""))
    if dtype is None:
        raise InvalidConfigError(f"unknown dtype {raw!r}", path=path, field="torch_dtype")
    return dtype


def _modelopt(algo: Any, ignore: list[str], where: str) -> tuple[QuantSpec | None, str | None]:
    """A ModelOpt quant_algo: FP8 (static per-tensor input scales) or NVFP4 (e2m1 + an fp8
    scale per 16); any other is not sized from the config."""
    name = str(algo or "").upper()
    if name == "FP8":
        return QuantSpec(method="fp8", static_input_scale=True, ignore=ignore,
                         source="checkpoint"), None
    if name == "NVFP4":
        return QuantSpec(method="nvfp4", weight_bits=4, group_size=16, ignore=ignore,
                         source="checkpoint"), None
    return None, f"weight quantization {algo!r} ({where})"


def _quantization(cfg: dict[str, Any], extra: dict[str, Any] | None,
                  path: str) -> tuple[QuantSpec | None, str | None]:
    """The checkpoint's weight format → QuantSpec (bytes per tensor in weights.py). Formats not
    recognised → (None, their description): their bytes need the safetensors headers.

    Read from quantization_config (fp8, mxfp4, awq, gptq, compressed-tensors) or ModelOpt's
    hf_quant_config.json (FP8, NVFP4); ENGINE_MEMORY §1.8 lists what each keeps resident."""
    qc = cfg.get("quantization_config")
    if qc is None and extra is not None:  # ModelOpt: hf_quant_config.json beside config.json
        q = extra.get("quantization", {})
        if not isinstance(q, dict):
            raise InvalidConfigError("expected an object", path="hf_quant_config.json", field="quantization")
        ignore = _names(q.get("exclude_modules"), "hf_quant_config.json", "quantization.exclude_modules")
        return _modelopt(q.get("quant_algo"), ignore, "hf_quant_config.json")
    if qc is None:
        return None, None
    if not isinstance(qc, dict):
        raise InvalidConfigError("expected an object", path=path, field="quantization_config")
    method = str(qc.get("quant_method", "")).lower()
    skip = _names(qc.get("modules_to_not_convert") or qc.get("ignored_layers") or qc.get("ignore"),
                  path, "quantization_config.ignore")
    if method == "fp8":
        block = _block(qc.get("weight_block_size"), path, "quantization_config.weight_block_size")
        return QuantSpec(
            method="fp8", block_size=block,
            static_input_scale=qc.get("activation_scheme") == "static", ignore=skip,
            source="checkpoint"), None
    if method == "modelopt":
        # Newer ModelOpt exports repeat hf_quant_config.json inside config.json (quant_algo,
        # ignore): read them the same way (e.g. nvidia/MiniMax-M2.5-NVFP4).
        return _modelopt(qc.get("quant_algo"), skip, "modelopt")
    if method == "fbgemm_fp8":
        # vllm/model_executor/layers/quantization/fbgemm_fp8.py (v0.6–main): every LinearBase not
        # in modules_to_not_convert gets an fp8 weight, one fp32 scale per output row and an fp32
        # scalar input_scale_ub (activation_scale_ub); the LM head and embeddings stay 16-bit.
        return QuantSpec(method="fp8", per_channel=True, static_input_scale=True, ignore=skip,
                         source="checkpoint"), None
    if method == "mxfp4":
        return QuantSpec(method="mxfp4", weight_bits=4, group_size=32, experts_only=True,
                         ignore=skip, source="checkpoint"), None
    if method in {"awq", "gptq"}:
        bits = qc.get("bits") or qc.get("w_bit") or 4
        group = _group(qc.get("group_size") or qc.get("q_group_size"), path,
                       "quantization_config.group_size", 128)
        if not isinstance(bits, int) or bits not in (2, 3, 4, 8):
            raise InvalidConfigError(f"unsupported bit width {bits!r}", path=path,
                                     field="quantization_config.bits")
        zero = bool(qc.get("zero_point", True)) if method == "awq" else not qc.get("sym", True)
        return QuantSpec(method=method, weight_bits=bits, group_size=None if group == -1 else group,
                         zero_points=zero, act_order=bool(qc.get("desc_act")), ignore=skip,
                         source="checkpoint"), None
    if method == "compressed-tensors":
        groups = qc.get("config_groups") or {}
        if not isinstance(groups, dict) or not all(
                isinstance(g, dict) and isinstance(g.get("weights") or {}, dict) for g in groups.values()):
            raise InvalidConfigError("expected an object of {\"weights\": {…}} groups", path=path,
                                     field="quantization_config.config_groups")
        weights = [g.get("weights") or {} for g in groups.values()]
        if not weights:
            return None, "compressed-tensors without weight groups"
        w = weights[0]
        bits, kind, strategy = w.get("num_bits"), w.get("type"), w.get("strategy")
        where = "quantization_config.config_groups.weights"
        block_structure = _block(w.get("block_structure"), path, f"{where}.block_structure")
        w_group = _group(w.get("group_size"), path, f"{where}.group_size", None)
        same = all((x.get("num_bits"), x.get("type")) == (bits, kind) for x in weights)
        if same and bits == 8 and kind == "float":
            return QuantSpec(method="fp8", per_channel=all(x.get("strategy") == "channel" for x in weights),
                             block_size=block_structure,
                             ignore=skip, source="checkpoint"), None
        if same and bits == 8 and kind == "int":
            return QuantSpec(method="int8", per_channel=strategy == "channel", ignore=skip,
                             source="checkpoint"), None
        if same and bits == 4 and kind == "float":  # nvfp4: e2m1 + fp8 scale per 16
            return QuantSpec(method="nvfp4", weight_bits=4, group_size=w_group or 16,
                             ignore=skip, source="checkpoint"), None
        if same and bits in (4, 8) and kind == "int":  # pack-quantized w4a16 / w8a16
            return QuantSpec(method="w4a16", weight_bits=bits,
                             group_size=w_group if strategy == "group" else None,
                             zero_points=not w.get("symmetric", True), act_order=bool(w.get("actorder")),
                             ignore=skip, source="checkpoint"), None
        return None, f"compressed-tensors weights {bits}-bit {kind} ({strategy})"
    return None, f"weight quantization {method or 'unknown'!r}"


def _rope(cfg: dict[str, Any], path: str) -> tuple[str | None, float | None, int | None]:
    key = "rope_scaling" if cfg.get("rope_scaling") else "rope_parameters"
    rs = cfg.get(key)
    if not isinstance(rs, dict):
        return None, None, None
    rtype = rs.get("rope_type") or rs.get("type")
    if rtype == "su":  # vllm/transformers_utils/config.py patch_rope_scaling_dict: legacy name
        rtype = "longrope"
    if rtype in (None, "default"):
        return None, None, None
    if not isinstance(rtype, str):
        raise InvalidConfigError(f"expected a string, got {short(rtype)}", path=path,
                                 field=f"{key}.rope_type")
    r = _Reader(rs, path)
    try:
        factor = r.float("factor", lo=0.0, hi=1024.0)  # published factors: 2 to 64
        original = r.opt_int("original_max_position_embeddings")
    except InvalidConfigError as e:
        raise InvalidConfigError(e.message.split(": ", 2)[-1], path=path,
                                 field=f"{key}.{e.field}") from None
    return rtype, factor, original


# Gemma3TextConfig defaults (transformers models/gemma3/configuration_gemma3.py): a sparse
# published config (google/gemma-3-4b-it) leaves these out.
GEMMA3_TEXT_DEFAULTS = {
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "vocab_size": 262208,
    "max_position_embeddings": 131072, "sliding_window": 4096, "sliding_window_pattern": 6,
    "tie_word_embeddings": True,
}
# Gemma2Config / Gemma3 tie the embeddings by default (the published configs omit the key).
TIED_BY_DEFAULT = {"gemma2", "gemma3", "gemma3_text"}
# MiniCPM3Config in the model repo's configuration_minicpm.py: tie_word_embeddings=True, and
# openbmb/MiniCPM3-4B's config.json leaves the key out (vLLM minicpm.py then ties lm_head).
TIED_BY_DEFAULT |= {"minicpm3"}
MLA_FAMILIES = {"deepseek_v2", "deepseek_v3", "kimi_k2"}
MAMBA_FAMILIES = {"jamba", "bamba", "nemotron_h"}
MAMBA_KEYS = ("attn_layer_period", "hybrid_override_pattern", "layers_block_type", "ssm_cfg",
              "mamba_d_state", "mamba_expand")


def _detect_unsupported(raw: dict[str, Any], cfg: dict[str, Any], family: str) -> list[str]:
    """Layout features whose KV or weights kvplan does not model (never guess silently)."""
    found = []
    vc = raw.get("vision_config")
    if "audio_config" in raw or (vc is not None and raw.get("model_type") not in VISION_MODEL_TYPES):
        found.append("multimodal encoder (its weights are not counted)")
    elif (raw.get("model_type") in {"llava", "llava_next", "mistral3"} and isinstance(vc, dict)
          and vc.get("model_type", "clip_vision_model") not in {"clip_vision_model", "pixtral"}):
        found.append(f"vision tower {vc.get('model_type')!r} (its weights are not counted)")
    if cfg.get("kv_lora_rank") and family not in MLA_FAMILIES and family != "minicpm3":
        found.append("MLA attention in an unrecognised family")
    if any(k in cfg for k in MAMBA_KEYS) and family not in MAMBA_FAMILIES:
        found.append("hybrid Mamba layers of an unrecognised family (Jamba, Bamba, Nemotron-H and "
                     "Qwen3-Next are modelled; Falcon-H1 and MiniMax are not)")
    if family == "nemotron_h" and "E" in str(cfg.get("hybrid_override_pattern") or ""):
        found.append("Nemotron-H MoE ('E') blocks (their experts are not counted)")
    if family in {"qwen2", "qwen2_moe", "qwen3", "qwen3_moe"} and cfg.get("use_sliding_window"):
        found.append("Qwen sliding window on layers above max_window_layers")
    if cfg.get("num_kv_shared_layers") or cfg.get("kv_sharing"):
        found.append("KV-sharing layers")
    return found


def _layer_types(cfg: dict[str, Any], family: str, layers: int,
                 path: str = "config.json") -> tuple[list[str], int | None, int | None]:
    """(per-layer kind, sliding window, chunk size). Kinds: full, sliding, chunked, linear.

    Sources: the config's `layer_types` (transformers ≥ 4.5x); else Gemma 2 even layers slide
    (vllm/model_executor/models/gemma2.py); Gemma 3 slides except every `sliding_window_pattern`-th
    layer (gemma3.py); Qwen3-Next every `full_attention_interval`-th layer is full attention,
    the rest Gated DeltaNet (qwen3_next.py); Llama 4 RoPE layers use chunked local attention,
    the NoPE layers (every 4th, or `no_rope_layers`) global (llama4.py); otherwise a model-level
    `sliding_window` applies to every layer (vllm/attention/layer.py cache_config.sliding_window)
    unless `use_sliding_window` is false."""
    r = _Reader(cfg, path)
    # Some configs write `"sliding_window": false` (or null) for "none"; those mean no window.
    window = None if isinstance(cfg.get("sliding_window"), bool) else r.opt_int("sliding_window")
    chunk = r.opt_int("attention_chunk_size")
    names = {"full_attention": "full", "sliding_attention": "sliding", "linear_attention": "linear",
             "chunked_attention": "chunked"}
    explicit = cfg.get("layer_types")
    if explicit is not None and not (isinstance(explicit, list) and all(isinstance(t, str) for t in explicit)):
        raise InvalidConfigError(f"expected a list of layer type names, got {short(explicit)}",
                                 path=path, field="layer_types")
    if isinstance(explicit, list) and len(explicit) == layers:
        kinds = [names.get(str(t), "full") for t in explicit]
    elif family == "gemma2":
        kinds = ["sliding" if i % 2 == 0 else "full" for i in range(layers)]
    elif family == "gemma3":
        pattern = r.opt_int("sliding_window_pattern") or r.opt_int("_sliding_window_pattern") or 6
        kinds = ["sliding" if (i + 1) % pattern else "full" for i in range(layers)]
    elif family == "qwen3_next":
        interval = r.opt_int("full_attention_interval") or 4
        kinds = ["full" if (i + 1) % interval == 0 else "linear" for i in range(layers)]
    elif family == "jamba":  # transformers JambaConfig.layers_block_type
        period, offset = r.opt_int("attn_layer_period") or 8, r.opt_int("attn_layer_offset", 4)
        kinds = ["full" if i % period == offset else "linear" for i in range(layers)]
    elif family == "bamba":
        attn = set(r.int_list("attn_layer_indices"))
        kinds = ["full" if i in attn else "linear" for i in range(layers)]
    elif family == "nemotron_h":  # one block per character: M Mamba2, * attention, - / E MLP
        pattern = str(cfg.get("hybrid_override_pattern") or "")
        if len(pattern) != layers or set(pattern) - set("M*-E"):
            raise InvalidConfigError(f"expected {layers} characters of M, *, - or E, got {short(pattern)}",
                                     path=path, field="hybrid_override_pattern")
        kinds = [{"M": "linear", "*": "full"}.get(c, "none") for c in pattern]
    elif family == "llama4" and chunk:
        nope = r.int_list("no_rope_layers")
        kinds = [("full" if nope[i] == 0 else "chunked") if len(nope) == layers
                 else ("full" if (i + 1) % 4 == 0 else "chunked") for i in range(layers)]
    elif window and cfg.get("use_sliding_window", True) is not False and family not in MLA_FAMILIES:
        kinds = ["sliding"] * layers
    else:
        kinds = []
    if "sliding" in kinds and not window:
        kinds = ["full" if k == "sliding" else k for k in kinds]
    if kinds and all(k == "full" for k in kinds):
        kinds = []
    return kinds, (window if "sliding" in kinds else None), (chunk if "chunked" in kinds else None)


def _moe(cfg: dict[str, Any], family: str, r: _Reader, layers: int, intermediate: int) -> MoeSpec | None:
    """Experts per family: Mixtral (all layers), Qwen2/3-MoE and Qwen3-Next (decoder_sparse_step,
    mlp_only_layers, gated shared expert), DeepSeek (first_k_dense_replace, moe_layer_freq,
    n_shared_experts, V3's fp32 score-correction bias), gpt-oss (biases everywhere), Llama 4
    (interleave_moe_layer_step, one shared expert)."""
    if family in LLAMA_VARIANT_FAMILIES:
        return None  # fam-b: experts (PhiMoE, Granite-MoE, MiniCPM-MoE) set by _llama_variant
    if family == "mixtral":
        return MoeSpec(num_experts=r.int("num_local_experts"), top_k=r.int("num_experts_per_tok"),
                       expert_intermediate_size=intermediate, moe_layers=list(range(layers)))
    if family == "jamba":  # experts every expert_layer_period-th layer from expert_layer_offset
        period, offset = r.int("expert_layer_period", default=2), r.int("expert_layer_offset", default=1)
        return MoeSpec(num_experts=r.int("num_experts"), top_k=r.int("num_experts_per_tok"),
                       expert_intermediate_size=intermediate,
                       moe_layers=[i for i in range(layers) if i % period == offset])
    if family == "gpt_oss":
        return MoeSpec(num_experts=r.int("num_local_experts"),
                       top_k=r.int("num_experts_per_tok", "experts_per_token"),
                       expert_intermediate_size=intermediate, moe_layers=list(range(layers)),
                       router_bias=True, expert_bias=True)
    if family in MLA_FAMILIES and cfg.get("n_routed_experts"):
        first, freq = r.int("first_k_dense_replace", default=0), r.int("moe_layer_freq", default=1)
        inter = r.int("moe_intermediate_size")
        return MoeSpec(num_experts=r.int("n_routed_experts"), top_k=r.int("num_experts_per_tok"),
                       expert_intermediate_size=inter,
                       shared_expert_intermediate_size=(r.int("n_shared_experts", default=0) or 0) * inter,
                       moe_layers=[i for i in range(layers) if i >= first and i % freq == 0],
                       score_correction_bias=cfg.get("topk_method") == "noaux_tc")
    if family == "glm4_moe":
        # vllm/model_executor/models/glm4_moe.py (main @ 002d6073): layers ≥ first_k_dense_replace
        # are MoE; the router is an fp32 nn.Linear with an fp32 e_score_correction_bias; the
        # shared experts are one ungated MLP of n_shared_experts × moe_intermediate_size.
        first, inter = r.int("first_k_dense_replace", default=0), r.int("moe_intermediate_size")
        return MoeSpec(num_experts=r.int("n_routed_experts"), top_k=r.int("num_experts_per_tok"),
                       expert_intermediate_size=inter,
                       shared_expert_intermediate_size=(r.int("n_shared_experts", default=0) or 0) * inter,
                       moe_layers=[i for i in range(layers) if i >= first],
                       score_correction_bias=True, router_dtype="float32")
    if family == "minimax_m2":
        # vllm/model_executor/models/minimax_m2.py (main @ 01d99586): every layer is MoE over
        # num_local_experts experts of intermediate_size, no shared expert; fp32 ReplicatedLinear
        # router, fp32 e_score_correction_bias when use_routing_bias.
        return MoeSpec(num_experts=r.int("num_local_experts"), top_k=r.int("num_experts_per_tok"),
                       expert_intermediate_size=r.int("intermediate_size"),
                       moe_layers=list(range(layers)),
                       score_correction_bias=r.bool("use_routing_bias", False), router_dtype="float32")
    if family == "llama4":
        step = r.int("interleave_moe_layer_step", default=1)
        expert = r.int("intermediate_size")  # intermediate_size_mlp is the dense layers' width
        return MoeSpec(num_experts=r.int("num_local_experts"), top_k=r.int("num_experts_per_tok"),
                       expert_intermediate_size=expert, shared_expert_intermediate_size=expert,
                       moe_layers=[i for i in range(layers) if (i + 1) % step == 0])
    if family in {"qwen3_moe", "qwen2_moe", "qwen3_next"} or cfg.get("num_experts"):
        step = r.int("decoder_sparse_step", default=1)
        dense = set(r.int_list("mlp_only_layers"))
        shared = r.int("shared_expert_intermediate_size", default=0) or 0
        return MoeSpec(num_experts=r.int("num_experts"), top_k=r.int("num_experts_per_tok"),
                       expert_intermediate_size=r.int("moe_intermediate_size"),
                       shared_expert_intermediate_size=shared, shared_expert_gate=shared > 0,
                       moe_layers=[i for i in range(layers) if i not in dense and (i + 1) % step == 0])
    return None


def _mamba_spec(cfg: dict[str, Any], family: str, r: _Reader, hidden_for_hd: int | None) -> LinearAttentionSpec:
    """Mamba dims by family: Jamba (Mamba1; JambaConfig mamba_d_state, mamba_d_conv,
    mamba_expand, mamba_dt_rank 'auto' = ceil(hidden / 16)), Bamba (Mamba2; BambaConfig
    mamba_n_heads, mamba_d_head 'auto' = expand × hidden / heads, mamba_n_groups) and Nemotron-H
    (Mamba2; mamba_num_heads × mamba_head_dim, n_groups, ssm_state_size, conv_kernel, use_bias;
    vLLM keeps its SSM state in the config's mamba_ssm_cache_dtype, else float32 —
    vllm/model_executor/models/config.py NemotronHForCausalLMConfig)."""
    hidden = hidden_for_hd or 0
    if family == "nemotron_h":
        heads, head_dim = r.int("mamba_num_heads"), r.int("mamba_head_dim")
        return LinearAttentionSpec(
            kind="mamba2", conv_kernel=r.int("conv_kernel", default=4) or 4,
            intermediate_size=heads * head_dim, state_size=r.int("ssm_state_size"),
            num_heads=heads, head_dim=head_dim, n_groups=r.int("n_groups", default=1) or 1,
            conv_bias=bool(cfg.get("use_conv_bias", True)), in_proj_bias=bool(cfg.get("use_bias", False)),
            ssm_dtype=_ssm_dtype(cfg, r.path))
    expand = r.int("mamba_expand", default=2) or 2
    if family == "jamba":
        dt_rank = cfg.get("mamba_dt_rank", "auto")
        if dt_rank not in (None, "auto"):
            dt_rank = r.check_int("mamba_dt_rank", dt_rank)
        return LinearAttentionSpec(
            kind="mamba1", conv_kernel=r.int("mamba_d_conv", default=4) or 4,
            intermediate_size=expand * hidden, state_size=r.int("mamba_d_state", default=16) or 16,
            dt_rank=-(-hidden // 16) if dt_rank in (None, "auto") else int(dt_rank),
            conv_bias=bool(cfg.get("mamba_conv_bias", True)))
    heads = r.int("mamba_n_heads")
    head_dim = cfg.get("mamba_d_head", "auto")
    if head_dim not in (None, "auto"):
        head_dim = r.check_int("mamba_d_head", head_dim)
    inner = expand * hidden
    return LinearAttentionSpec(
        kind="mamba2", conv_kernel=r.int("mamba_d_conv", default=4) or 4, intermediate_size=inner,
        state_size=r.int("mamba_d_state"), num_heads=heads,
        head_dim=inner // heads if head_dim in (None, "auto") else int(head_dim),
        n_groups=r.int("mamba_n_groups", default=1) or 1, conv_bias=bool(cfg.get("mamba_conv_bias", True)))


# Vision-language wrappers whose tower kvplan counts (gemma3 / llama4 above, these below),
# with the language-model family each runs: Qwen-VL's LM is Qwen2 (top-level keys, or
# text_config in re-serialised configs); the llava-style wrappers name it in
# text_config.model_type, defaulting as transformers' config classes do (LlavaConfig /
# LlavaNextConfig / Idefics3Config: llama; Mistral3Config: mistral).
VLM_TEXT_FAMILY = {"qwen2_vl": "qwen2", "qwen2_5_vl": "qwen2", "qwen3_vl": "qwen3",
                   "qwen3_vl_moe": "qwen3_moe", "llava": "llama",
                   "llava_next": "llama", "mistral3": "mistral", "idefics3": "llama",
                   "phi3_v": "phi3"}
VISION_MODEL_TYPES = {"gemma3", "llama4", *VLM_TEXT_FAMILY}
# Defaults transformers fills into a sparse text_config (llava-hf configs list only what
# differs): LlamaConfig and MistralConfig (models/llama|mistral/configuration_*.py).
TEXT_CONFIG_DEFAULTS = {
    "llama": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
              "num_hidden_layers": 32, "num_attention_heads": 32, "max_position_embeddings": 2048,
              "tie_word_embeddings": False},
    "mistral": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
                "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                "max_position_embeddings": 4096 * 32, "sliding_window": 4096,
                "tie_word_embeddings": False},
}
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
        raise InvalidConfigError(f"expected a list of [height, width] pairs, got {short(pinpoints)}",
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
    r = _Reader(ip, path)
    dim_out = r.int("image_dim_out")
    r.int("num_img_tokens")  # required by vLLM's Phi3HDImageEmbedding
    layer_idx = ip.get("layer_idx", -2)
    if isinstance(layer_idx, bool) or not isinstance(layer_idx, int) or not -24 <= layer_idx < 24:
        raise InvalidConfigError(f"expected a CLIP layer index within ±24, got {short(layer_idx)}",
                                 path=path, field="img_processor.layer_idx")
    if not (el.get("use_hd_transform") and el.get("with_learnable_separator")):
        raise InvalidConfigError("vLLM's phi3v.py asserts use_hd_transform and "
                                 "with_learnable_separator", path=path, field="embd_layer")
    crops = _Reader(raw, path).int("num_crops", default=16)
    assert dim_out and crops
    kept = 24 + layer_idx + 1 if layer_idx < 0 else layer_idx + 1  # _init_img_processor
    return VisionSpec(
        kind="phi3v", hidden_size=1024, intermediate_size=4096, num_layers=kept,
        config_num_layers=24 if kept < 24 else None, patch_size=14, image_size=336,
        text_hidden_size=text_hidden, projector_input_dim=4 * dim_out, num_crops=crops,
        max_tokens_per_image=phi3v_tokens(*PHI3V_PROFILE_IMAGE, crops))


def _vision(raw: dict[str, Any], model_type: str, text_hidden: int,
            path: str = "config.json") -> VisionSpec | None:
    if model_type == "phi3_v":
        return _phi3v_vision(raw, text_hidden, path)
    vc = raw.get("vision_config")
    if not isinstance(vc, dict) or model_type not in VISION_MODEL_TYPES:
        return None
    vr = _Reader(vc, path)
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "patch_size", "image_size",
                "num_channels", "projector_input_dim", "projector_output_dim", "vision_output_dim",
                "depth", "embed_dim", "num_heads", "mlp_ratio", "in_chans", "in_channels",
                "out_hidden_size", "spatial_merge_size", "temporal_patch_size",
                "num_position_embeddings"):
        if vc.get(key) is not None:
            vr.check_int(key, vc[key], where=f"vision_config.{key}")
    vr.float("pixel_shuffle_ratio", lo=0.0, hi=1.0)
    top = _Reader(raw, path)
    try:
        if model_type in {"gemma3", "llama4"}:
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
        if model_type in QWEN_VL_MAX_PIXELS:
            # Qwen2VLVisionConfig: embed_dim is the ViT width, hidden_size the LM's; Qwen2.5-VL
            # and Qwen3-VL: hidden_size is the ViT width, out_hidden_size the LM's.
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
        if model_type in {"llava", "llava_next", "mistral3"}:
            pixtral = vc.get("model_type") == "pixtral"
            if not pixtral and vc.get("model_type", "clip_vision_model") != "clip_vision_model":
                return None  # other towers (SigLIP llava variants) are not modelled
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
        # idefics3: SigLIP-style tower, pixel-shuffle connector by scale_factor
        scale = top.int("scale_factor", default=2)
        image, patch = vc.get("image_size", 224), vc.get("patch_size", 32)
        per_tile = (image // patch) ** 2 // scale ** 2
        return VisionSpec(
            kind="idefics3", hidden_size=vc.get("hidden_size", 768),
            intermediate_size=vc.get("intermediate_size", 3072),
            num_layers=vc.get("num_hidden_layers", 12), patch_size=patch, image_size=image,
            num_channels=vc.get("num_channels", 3), text_hidden_size=text_hidden,
            spatial_merge_size=scale, projector_bias=False,
            max_tokens_per_image=(IDEFICS3_MAX_TILES_PER_SIDE ** 2 + 1) * per_tile)
    except KeyError as e:
        raise InvalidConfigError("missing (needed to count the vision tower)", path=path,
                                 field=f"vision_config.{e.args[0]}") from None


def _fam_a_layout(cfg: dict[str, Any], family: str, model_type: str, r: _Reader) -> dict[str, Any]:
    """Decoder families (fam-a) as vLLM v0.11 builds them (vllm/model_executor/models/<file>.py).
    Keys starting with "_" are the geometry _spec_from_config reads; the rest are ModelSpec
    fields that replace the Llama-style defaults. Every family here has LayerNorms (weight, and
    a bias unless noted), a non-gated MLP and fused, head-split q/k/v.

    gpt2.py: learned wpe (n_positions rows, replicated), c_attn/c_proj/c_fc/c_proj all biased,
      MLP n_inner or 4·n_embd, two LayerNorms, tied head.
    gpt_bigcode.py: as GPT-2, q/k/v over 1 KV head when multi_query (GPTBigCodeConfig: true).
    gpt_j.py: one LayerNorm (parallel block), q/k/v and out_proj without bias, fc_in/fc_out
      biased (n_inner or 4·n_embd), partial RoPE over rotary_dim, untied LM head with a bias.
    gpt_neox.py: two LayerNorms (use_parallel_residual does not change the weights),
      query_key_value/dense biased (attention_bias, default true), MLP intermediate_size
      biased, RoPE over int(head_dim · rotary_pct), embed_out untied unless tie_word_embeddings.
    falcon.py: KV heads num_kv_heads (RW: n_head_kv) with new_decoder_architecture (RWConfig
      forces it at hidden 8192), else 1 with multi_query, else all; one LayerNorm when
      parallel_attn, two (ln_attn/ln_mlp) with new_decoder_architecture unless
      num_ln_in_parallel_attn is 1, two when not parallel; linears biased per `bias`; MLP
      4·hidden (hard-coded); RoPE over the whole head unless alibi; head tied unless
      tie_word_embeddings is false. RoPE cache rows: max_position_embeddings (FalconConfig
      default 2048); RW configs have none, so vLLM's getattr default 8192.
    starcoder2.py: nn.LayerNorm norms, q/k/v/o and c_fc/c_proj biased per use_bias (default
      true), GQA, full RoPE, sliding window from the config.
    opt.py: learned positions max_position_embeddings + 2 rows (replicated), embed_tokens
      vocab × word_embed_proj_dim with ReplicatedLinear project_in/project_out (no bias) when
      that differs from hidden_size, final LayerNorm only with do_layer_norm_before (and not
      _remove_final_layer_norm), linears biased per enable_bias, MLP ffn_dim, tied head.
    bloom.py: ALiBi (no RoPE), word_embeddings_layernorm, biased fused qkv/dense and 4·hidden
      MLP, two LayerNorms, tied head.
    mpt.py: ALiBi, d_model/n_heads/n_layers, KV heads attn_config.kv_n_heads, MLP
      expansion_ratio · d_model, no_bias (MptConfig default true) drops every linear and
      LayerNorm bias, tied head."""
    out: dict[str, Any] = {"mlp_gated": False, "norm_bias": True, "norms_per_layer": 2,
                           "_unsupported": []}
    unsupported = out["_unsupported"]
    if family == "mpt":
        ac = cfg.get("attn_config") or {}
        if not isinstance(ac, dict):
            raise InvalidConfigError(f"expected an object, got {short(ac)}", path=r.path,
                                     field="attn_config")
        layers, heads, hidden = r.int("n_layers"), r.int("n_heads"), r.int("d_model")
        kv = ac.get("kv_n_heads")
        kv_heads = (heads if kv is None
                    else r.check_int("kv_n_heads", kv, where="attn_config.kv_n_heads"))
        ratio = r.int("expansion_ratio", default=4)
        biased = not r.bool("no_bias", True)
        if ac.get("alibi") is False or ac.get("qk_ln") or ac.get("prefix_lm"):
            unsupported.append("MPT without ALiBi, or with qk_ln / prefix_lm (vLLM's mpt.py "
                               "asserts ALiBi and no prefix_lm; q/k LayerNorms not counted)")
        out.update(_layers=layers, _heads=heads, _kv_heads=kv_heads, _head_dim=hidden // heads,
                   _intermediate=ratio * hidden, _qkv_bias=biased, _o_bias=biased,
                   _mlp_bias=biased, _rotary_dim=0, _tie=True, norm_bias=biased, alibi=True,
                   rope_cache_positions=0)
        return out
    layers = r.int("num_hidden_layers", "n_layer", "num_layers")
    heads = r.int("num_attention_heads", "n_head")
    hidden = r.int("hidden_size", "n_embd", "n_embed")
    head_dim = hidden // heads
    if head_dim < 1:
        raise InvalidConfigError(f"hidden_size {hidden} over {heads} heads leaves no head "
                                 "dimension", path=r.path, field="num_attention_heads")
    kv_heads, rotary_dim, rope_rows, tie = heads, 0, 0, r.bool("tie_word_embeddings", True)
    four_h = 4 * hidden
    if family in {"gpt2", "gpt_bigcode"}:
        if family == "gpt_bigcode" and r.bool("multi_query", True):
            kv_heads = 1
        inter = r.int("n_inner", default=0) or four_h
        qkv_bias = o_bias = mlp_bias = True
        # GPT2Config / GPTBigCodeConfig default n_positions: 1024
        out["position_embedding_rows"] = r.int("n_positions", "max_position_embeddings",
                                               default=1024)
    elif family == "gptj":
        inter = r.int("n_inner", default=0) or four_h
        qkv_bias = o_bias = False
        mlp_bias, tie = True, False
        rotary_dim = r.int("rotary_dim", default=64) or head_dim
        rope_rows = r.int("n_positions", "max_position_embeddings", default=2048)
        out.update(norms_per_layer=1, lm_head_bias=True)
    elif family == "gpt_neox":
        inter = r.int("intermediate_size")
        qkv_bias = o_bias = r.bool("attention_bias", True)
        mlp_bias, tie = True, r.bool("tie_word_embeddings", False)
        rotary_dim = int(head_dim * (r.float("rotary_pct", lo=0.0, hi=1.0) or 1.0))
        rope_rows = r.int("max_position_embeddings", default=2048)
    elif family == "falcon":
        rw = model_type != "falcon"
        new_arch = r.bool("new_decoder_architecture", False) or (rw and hidden == 8192)
        if new_arch:
            kv_heads = (r.int("n_head_kv", default=1) if rw
                        else r.int("num_kv_heads", default=heads))
        elif r.bool("multi_query", True):
            kv_heads = 1
        parallel = r.bool("parallel_attn", not rw)
        n_ln = cfg.get("num_ln_in_parallel_attn")
        if n_ln is None and new_arch:
            n_ln = 2
        out["norms_per_layer"] = 2 if not parallel or n_ln == 2 else 1
        inter = four_h
        qkv_bias = o_bias = mlp_bias = r.bool("bias", False)
        alibi = r.bool("alibi", False)
        rotary_dim = 0 if alibi else head_dim
        rope_rows = 0 if alibi else (8192 if rw else r.int("max_position_embeddings", default=2048))
        out["alibi"] = alibi
    elif family == "starcoder2":
        kv_heads = r.int("num_key_value_heads", default=heads)
        inter = r.int("intermediate_size")
        qkv_bias = o_bias = mlp_bias = r.bool("use_bias", True)
        rotary_dim = head_dim
        rope_rows = r.int("max_position_embeddings", default=4096)
    elif family == "opt":
        inter = r.int("ffn_dim")
        qkv_bias = o_bias = mlp_bias = r.bool("enable_bias", True)
        proj = r.int("word_embed_proj_dim", default=hidden)
        out["position_embedding_rows"] = r.int("max_position_embeddings", default=2048) + 2
        out["word_embed_proj_dim"] = proj if proj != hidden else None
        out["final_norm"] = r.bool("do_layer_norm_before", True) and not r.bool(
            "_remove_final_layer_norm", False)
        if not r.bool("layer_norm_elementwise_affine", True):
            unsupported.append("OPT LayerNorms without weights (layer_norm_elementwise_affine "
                               "false): counted with weight and bias")
    else:  # bloom
        inter = four_h
        qkv_bias = o_bias = mlp_bias = True
        out.update(embedding_norm=True, alibi=True)
    out.update(_layers=layers, _heads=heads, _kv_heads=kv_heads, _head_dim=head_dim,
               _intermediate=inter, _qkv_bias=qkv_bias, _o_bias=o_bias, _mlp_bias=mlp_bias,
               _rotary_dim=rotary_dim, _tie=tie, rope_cache_positions=rope_rows)
    return out


def _whisper_layout(cfg: dict[str, Any], r: _Reader) -> dict[str, Any]:
    """Whisper (vllm/model_executor/models/whisper.py, main @ 00a23257), in _fam_a_layout's
    shape. The decoder: decoder_layers layers of d_model width, MHA over decoder_attention_heads
    (head_dim d_model / heads), q/k/v fused with biases (k's bias is built and zero-filled by
    _create_fake_bias_for_k_proj), biased out_proj, a cross-attention (q_proj, fused kv_proj,
    out_proj, all biased), a non-gated fc1/fc2 MLP of decoder_ffn_dim with biases, three
    LayerNorms with biases, learned positions (max_target_positions rows), a final LayerNorm;
    embed_tokens is a plain nn.Embedding (whole on every TP rank) and proj_out is tied to it.
    The encoder (AudioEncoderSpec) runs once per request; each decoder layer's
    cross-attention caches max_source_positions encoder frames (CrossAttentionSpec)."""
    layers, heads = r.int("decoder_layers"), r.int("decoder_attention_heads")
    d_model = r.int("d_model")
    assert layers and heads and d_model
    if d_model % heads:
        raise InvalidConfigError(f"d_model {d_model} is not a multiple of the {heads} heads",
                                 path=r.path, field="decoder_attention_heads")
    enc_heads = r.int("encoder_attention_heads")
    assert enc_heads
    if d_model % enc_heads:
        raise InvalidConfigError(f"d_model {d_model} is not a multiple of the {enc_heads} heads",
                                 path=r.path, field="encoder_attention_heads")
    frames = r.int("max_source_positions")
    encoder = AudioEncoderSpec(
        hidden_size=d_model, intermediate_size=r.int("encoder_ffn_dim"),
        num_layers=r.int("encoder_layers"), num_heads=enc_heads,
        num_mel_bins=r.int("num_mel_bins"), max_source_positions=frames)
    return {"mlp_gated": False, "norm_bias": True, "norms_per_layer": 3, "_unsupported": [],
            "_layers": layers, "_heads": heads, "_kv_heads": heads, "_head_dim": d_model // heads,
            "_intermediate": r.int("decoder_ffn_dim"), "_qkv_bias": True, "_o_bias": True,
            "_mlp_bias": True, "_rotary_dim": 0, "_tie": True, "rope_cache_positions": 0,
            "position_embedding_rows": r.int("max_target_positions"), "audio_encoder": encoder,
            "cross_attention_tokens": frames, "embedding_replicated": True}


def spec_from_config(cfg: dict[str, Any], *, model_id: str, source: str, path: str = "config.json",
                     extra: dict[str, Any] | None = None, local_dir: str | None = None) -> ModelSpec:
    """Normalise one HF config dict. `extra` is hf_quant_config.json when present; `local_dir`
    the directory a launcher would be given (local models only).

    Every field the math reads is validated by _Reader (type, sign, upper bound); a value
    that still trips the spec models' own checks is reported with its field, never as an
    internal error."""
    from pydantic import ValidationError

    try:
        spec = _spec_from_config(cfg, model_id=model_id, source=source, path=path, extra=extra,
                                 local_dir=local_dir)
        return _llama_variant(spec, cfg, path)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(x) for x in err["loc"])
        raise InvalidConfigError(f"{err['msg']} (as read into kvplan's model description)", path=path,
                                 field=field or None) from None
    except (TypeError, ArithmeticError, AttributeError, KeyError) as e:
        raise InvalidConfigError(f"a field has a value of the wrong type or range ({type(e).__name__})",
                                 path=path, hint="compare the file with the model's published "
                                 "config.json") from None


def _spec_from_config(cfg: dict[str, Any], *, model_id: str, source: str, path: str,
                      extra: dict[str, Any] | None, local_dir: str | None = None) -> ModelSpec:
    model_type = cfg.get("model_type") or ""
    if not isinstance(model_type, str) or len(model_type) > 64:
        raise InvalidConfigError(f"expected a short string, got {short(model_type)}", path=path,
                                 field="model_type")
    if not model_type:
        raise InvalidConfigError("missing", path=path, field="model_type",
                                 hint="is this a transformers config.json?")
    raw_cfg = cfg
    if "text_config" in cfg and isinstance(cfg["text_config"], dict):
        # Multimodal wrappers keep the language model under text_config (Llama 4, Gemma 3, …).
        text = cfg["text_config"]
        if model_type == "gemma3":
            text = {**GEMMA3_TEXT_DEFAULTS, **text}
        elif model_type in VLM_TEXT_FAMILY:
            text_type = text.get("model_type") or VLM_TEXT_FAMILY[model_type]
            text = {**TEXT_CONFIG_DEFAULTS.get(str(text_type), {}), **text}
        cfg = {**text, "torch_dtype": cfg.get("torch_dtype") or cfg.get("dtype") or text.get("torch_dtype"),
               "quantization_config": cfg.get("quantization_config")}
    family = {"gemma3_text": "gemma3", "llama4_text": "llama4"}.get(model_type, model_type)
    if model_type in VLM_TEXT_FAMILY:  # the wrapper's language model decides the layout
        text_type = cfg.get("model_type") if raw_cfg is not cfg else None
        family = VLM_TEXT_FAMILY[model_type] if model_type.startswith("qwen") else str(
            text_type or VLM_TEXT_FAMILY[model_type])
    elif model_type in FALCON_TYPES:
        family = "falcon"
    r = _Reader(cfg, path)

    mla = mla_projections = None
    fam_a: dict[str, Any] = {}
    if family in FAM_A_FAMILIES or family == "whisper":
        fam_a = (_fam_a_layout(cfg, family, model_type, r) if family in FAM_A_FAMILIES
                 else _whisper_layout(cfg, r))
        layers, heads, kv_heads = fam_a.pop("_layers"), fam_a.pop("_heads"), fam_a.pop("_kv_heads")
        head_dim, vocab = fam_a.pop("_head_dim"), r.int("vocab_size")
        intermediate = fam_a.pop("_intermediate")
        qkv_bias, o_bias = fam_a.pop("_qkv_bias"), fam_a.pop("_o_bias")
        mlp_bias = fam_a.pop("_mlp_bias")
        rotary_dim, tie, qk_norm = fam_a.pop("_rotary_dim"), fam_a.pop("_tie"), False
    elif model_type in {"chatglm", "glm"}:
        # GLM-4 (THUDM): ChatGLM key names; GQA via multi_query_group_num, head dim kv_channels,
        # fused dense_h_to_4h (gated, 2 × ffn_hidden_size), qkv bias, untied output_layer.
        layers = r.int("num_layers", "num_hidden_layers")
        heads = r.int("num_attention_heads")
        kv_heads = (r.int("multi_query_group_num") if cfg.get("multi_query_attention")
                    else heads)
        head_dim = r.int("kv_channels")
        vocab = r.int("padded_vocab_size", "vocab_size")
        intermediate = r.int("ffn_hidden_size")
        qkv_bias = r.bool("add_qkv_bias", False)
        o_bias = mlp_bias = r.bool("add_bias_linear", False)
        rotary_dim = head_dim // 2  # ChatGLM rotates half of each head (vllm chatglm.py)
        tie = r.bool("tie_word_embeddings", False)
        qk_norm = False
    else:
        layers = r.int("num_hidden_layers", "n_layer", "num_layers")
        heads = r.int("num_attention_heads", "n_head")
        # vLLM's order of KV-head keys (vllm/transformers_utils/config.py).
        kv_heads = r.int("n_head_kv", "num_kv_heads", "num_key_value_heads",
                         "multi_query_group_num", "num_attention_groups", default=heads)
        hidden_for_hd = r.int("hidden_size", "n_embd")
        head_dim = r.opt_int("head_dim") or r.opt_int("attention_head_dim") or hidden_for_hd // heads
        if head_dim < 1:
            raise InvalidConfigError(f"hidden_size {hidden_for_hd} over {heads} heads leaves no head "
                                     "dimension", path=path, field="head_dim")
        vocab = r.int("vocab_size")
        intermediate = r.int("intermediate_size", default=0)
        if family == "llama4":
            intermediate = r.int("intermediate_size_mlp", default=intermediate)  # dense layers
        # Always biased there (qwen2.py; qwen2_moe.py: QKVParallelLinear(bias=True), o_proj not).
        qkv_bias = r.bool("attention_bias", family in {"qwen2", "qwen2_moe", "phi"})
        # GLM-4.5's attention_bias biases q/k/v only (glm4_moe.py: o_proj bias=False).
        o_bias = (r.bool("attention_bias", family == "phi")
                  if family not in {"qwen2", "qwen2_moe", "glm4_moe"} else False)
        mlp_bias = r.bool("mlp_bias", family == "phi")
        # glm4_moe.py defaults partial_rotary_factor to 0.5; MiniMax-M2 names rotary_dim itself.
        partial = r.float("partial_rotary_factor", lo=0.0, hi=1.0) or (0.5 if family == "glm4_moe" else 1.0)
        rotary_dim = int(head_dim * partial)
        if family == "minimax_m2":
            rotary_dim = min(r.int("rotary_dim", default=head_dim), head_dim)
        if family in {"jamba", "nemotron_h"}:
            rotary_dim = 0  # their attention layers use no positional encoding
        tie = r.bool("tie_word_embeddings", family in TIED_BY_DEFAULT)
        qk_norm = family in {"qwen3", "qwen3_moe", "qwen3_next", "gemma3", "minimax_m2"}  # RMSNorm
        if family == "glm4_moe":  # optional per-head q/k RMSNorm (GLM-4.5 on, GLM-4.5-Air off)
            qk_norm = r.bool("use_qk_norm", False)
        if family in MLA_FAMILIES:
            mla = MlaSpec(kv_lora_rank=r.int("kv_lora_rank"), qk_rope_head_dim=r.int("qk_rope_head_dim"),
                          qk_nope_head_dim=r.int("qk_nope_head_dim"), v_head_dim=r.int("v_head_dim"),
                          q_lora_rank=r.int("q_lora_rank", required=False))
            head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
            rotary_dim = mla.qk_rope_head_dim
            kv_heads = heads  # nominal; the cache is one latent head (kv.py)
        elif family == "minicpm3":
            # vllm/model_executor/models/minicpm3.py (main @ 009ccee0): DeepSeek-V2-shaped
            # projections, but Attention(num_local_heads, qk_nope + qk_rope,
            # num_kv_heads=num_local_heads) caches full per-head K and V, V zero-padded from
            # v_head_dim to the same qk_nope + qk_rope head size; RoPE over qk_rope_head_dim.
            mla_projections = MlaSpec(
                kv_lora_rank=r.int("kv_lora_rank"), qk_rope_head_dim=r.int("qk_rope_head_dim"),
                qk_nope_head_dim=r.int("qk_nope_head_dim"),
                # the model repo's configuration_minicpm.py MiniCPM3Config: v_head_dim None →
                # qk_nope_head_dim (openbmb/MiniCPM3-4B's config.json leaves it out)
                v_head_dim=r.int("v_head_dim", "qk_nope_head_dim"),
                q_lora_rank=r.int("q_lora_rank", required=False))
            head_dim = mla_projections.qk_nope_head_dim + mla_projections.qk_rope_head_dim
            rotary_dim = mla_projections.qk_rope_head_dim
            kv_heads = heads
    hidden = r.int("hidden_size", "n_embd", "d_model", "n_embed")
    if layers > MAX_LAYERS:  # every plan walks the layers: bound the work
        raise InvalidConfigError(f"{layers} layers is over kvplan's limit of {MAX_LAYERS}", path=path,
                                 field="num_hidden_layers",
                                 hint="the largest published models have ~130 layers; check the config")
    assert layers and heads and kv_heads and hidden and vocab is not None  # for type checkers
    if heads % kv_heads:
        raise InvalidConfigError(
            f"num_attention_heads ({heads}) is not a multiple of the KV heads ({kv_heads})",
            path=path, field="num_key_value_heads")

    moe = _moe(cfg, family, r, layers, intermediate or 0)
    if family in {"gpt_oss", "minimax_m2"}:
        intermediate = 0  # every MLP is a MoE block
    layer_types, window, chunk = _layer_types(cfg, family, layers, path)
    linear = None
    if "linear" in layer_types and family in MAMBA_FAMILIES:
        linear = _mamba_spec(cfg, family, r, hidden_for_hd=r.int("hidden_size"))
    elif "linear" in layer_types:
        linear = LinearAttentionSpec(
            num_key_heads=r.int("linear_num_key_heads"), num_value_heads=r.int("linear_num_value_heads"),
            key_head_dim=r.int("linear_key_head_dim"), value_head_dim=r.int("linear_value_head_dim"),
            conv_kernel=r.int("linear_conv_kernel_dim"))
    unsupported = _detect_unsupported(raw_cfg, cfg, family)

    quant, unmodelled_quant = _quantization(cfg, extra, path)
    problems = []
    if "text_config" in raw_cfg and "vision_config" not in raw_cfg and family in {"gemma3", "llama4"}:
        problems.append(Problem(
            code="vision-not-counted", severity="warning",
            message="this multimodal config has no vision_config, so the vision tower's weights "
            "are not counted (plan the full config.json, or its checkpoint, to include them)"))
    if family == "nemotron_h" and not cfg.get("mamba_ssm_cache_dtype"):
        problems.append(Problem(
            code="mamba-ssm-dtype-assumed", severity="info",
            message="Nemotron-H's SSM state is counted in float32, the default vLLM's NemotronH "
            "config hook sets when the config names none; releases whose hook defaulted to "
            "float16 hold half the SSM bytes"))
    if cfg.get("auto_map") or "auto_map" in raw_cfg:
        problems.append(Problem(
            code="remote-code-not-run", severity="warning",
            message="this model needs trust_remote_code; kvplan read its config.json as data and "
            "never runs the repo's code, so layers defined only in that code are not seen"))
    rope_type, rope_factor, rope_original = _rope(cfg, path)
    # vLLM takes the minimum over these keys (a string there fails its comparison), so each
    # present one must be an integer: a quoted "131072" is refused, not silently skipped.
    max_len_keys = {k: r.check_int(k, cfg[k]) for k in MAX_LEN_KEYS if cfg.get(k) is not None}
    max_pos = max_len_keys.get("max_position_embeddings") or max_len_keys.get("seq_length")
    # Rows of vLLM's shared cos/sin cache (get_rope): the max position, times the factor for
    # scalings that precompute the stretched range (linear, dynamic, yarn from the original).
    cache_rows = int(max_pos or 0)
    if rope_type in {"linear", "dynamic"} and rope_factor:
        cache_rows = int(cache_rows * rope_factor)
    elif rope_type == "yarn" and rope_factor:
        cache_rows = int((rope_original or cache_rows) * rope_factor)
    if family == "gemma3" and rope_type:
        cache_rows += int(max_pos or 0)  # a second, unscaled cache for the local layers

    spec = ModelSpec(
        id=model_id, model_type=family, architectures=_architectures(raw_cfg, path),
        num_layers=layers, hidden_size=hidden, num_attention_heads=heads, num_kv_heads=kv_heads,
        head_dim=int(head_dim), vocab_size=vocab, intermediate_size=intermediate or 0,
        tie_word_embeddings=tie, qkv_bias=qkv_bias, o_bias=o_bias, mlp_bias=mlp_bias,
        qk_norm=qk_norm, qk_norm_layout="full_width_tp" if family == "minimax_m2" else "shared",
        norms_per_layer=(4 if family in {"gemma2", "gemma3"}
                         else 1 if family in {"nemotron_h", "phi"} else 2),
        norm_bias=family in BIASED_LAYERNORM_FAMILIES, lm_head_bias=family == "phi",
        mlp_layers=([i for i, k in enumerate(layer_types) if k == "none"]
                    if family == "nemotron_h" else None),
        mlp_gated=family not in {"nemotron_h", "phi"},
        attention_sinks=family == "gpt_oss", gated_attention=family == "qwen3_next",
        moe=moe, layer_types=layer_types, sliding_window=window, attention_chunk_size=chunk,
        mla=mla, mla_projections=mla_projections, linear_attention=linear,
        vision=_vision(raw_cfg, model_type, hidden, path),
        dtype=_dtype(cfg, path), max_position_embeddings=max_pos,
        max_len_keys=max_len_keys, rope_type=rope_type, rope_factor=rope_factor,
        rope_original_max_position=rope_original, rotary_dim=rotary_dim,
        rope_cache_positions=cache_rows,
        quantization=quant, unmodelled_quantization=unmodelled_quant,
        unmodelled_quantization_method=_quant_method_name(cfg, extra) if unmodelled_quant else None,
        unsupported=unsupported, problems=problems, source=source, local_dir=local_dir,
        layout_assumed=None if family in KNOWN_FAMILIES else family,
        # speculative decoding (docs/features.md): DeepSeek-V3-style MTP layers, EAGLE-3 heads
        mtp_layers=_positive_int(cfg.get("num_nextn_predict_layers")) or 0,
        draft_vocab_size=_positive_int(cfg.get("draft_vocab_size")),
    )
    if fam_a:  # decoder families (fam-a): their norms, positions and heads replace the defaults
        fam_a["unsupported"] = spec.unsupported + fam_a.pop("_unsupported")
        spec = ModelSpec.model_validate({**spec.model_dump(), **fam_a})
    return spec


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _quant_method_name(cfg: dict, extra: dict | None) -> str | None:
    """The method an engine detects for a quantization kvplan cannot size from the config:
    quantization_config.quant_method, else hf_quant_config.json's quant_algo (lowercased)."""
    q = cfg.get("quantization_config")
    if isinstance(q, dict) and isinstance(q.get("quant_method"), str):
        return q["quant_method"].lower()
    algo = (extra or {}).get("quantization", {}) if isinstance(extra, dict) else {}
    return algo.get("quant_algo").lower() if isinstance(algo, dict) and isinstance(
        algo.get("quant_algo"), str) else None


def spec_from_path(path: Path) -> ModelSpec:
    """A local model directory (config.json inside) or a config.json file. Files beside the
    config are read only when they resolve inside the model directory (limits.model_root)."""
    cfg_path = path / "config.json" if path.is_dir() else path
    if not cfg_path.exists():
        raise InvalidConfigError("no config.json in this directory", path=str(path),
                                 hint="point kvplan at the model directory or its config.json")
    root = model_root(path if path.is_dir() else path.parent)
    if path.is_dir():
        contained(cfg_path, root, what="config.json")
    cfg = load_config_file(cfg_path)
    extra_path = cfg_path.parent / "hf_quant_config.json"
    if extra_path.exists():
        contained(extra_path, model_root(cfg_path.parent), what="hf_quant_config.json")
    extra = load_config_file(extra_path) if extra_path.exists() else None
    folder = cfg_path.parent
    model_id = str(cfg.get("_name_or_path") or folder.resolve().name or cfg_path.stem)
    if path.is_dir():
        model_id = path.resolve().name or model_id
    # The launcher takes the directory: as the user wrote it, or resolved when it is "." / "".
    local_dir = str(folder) if str(folder) not in ("", ".") else str(folder.resolve())
    return spec_from_config(cfg, model_id=model_id, source=f"local file {cfg_path}",
                            path=str(cfg_path), extra=extra, local_dir=local_dir)


def _llama_variant(spec: ModelSpec, cfg: dict[str, Any], path: str) -> ModelSpec:
    """Llama-variant families (fam-b), as vLLM builds them (vllm/model_executor/models/<family>.py,
    main branch as read for v0.11+; transformers configuration_<family>.py for config defaults).
    The generic Llama reading in _spec_from_config is right for their q/k/v/o and gated MLP
    shapes; this applies what differs:

    * gemma (gemma.py): gated GeLU MLP, two RMSNorms; no lm_head of its own (logits from
      embed_tokens), so the embedding is tied whatever the config says.
    * cohere / cohere2 (commandr.py): ONE LayerNorm (weight, no bias) feeding attention and MLP
      in parallel; logits from embed_tokens (tied); use_qk_norm adds LayerNorm weights of shape
      [heads, head_dim] / [kv_heads, head_dim] split by heads over TP; the RoPE cache has
      model_max_length (else max_position_embeddings, else 8192) rows. cohere2: layers slide
      except every sliding_window_pattern-th (Cohere2Config default 4) unless layer_types says.
    * olmo (olmo.py): LayerNorm(elementwise_affine=False) — no norm tensors anywhere.
    * olmo2 (olmo2.py): no input norm; post-attention and post-feedforward RMSNorms; q_norm over
      heads·head_dim and k_norm over kv_heads·head_dim, replicated (all-gather under TP).
    * granite (granite.py): Llama + scalar multipliers (no tensors). granitemoe / granitemoeshared
      (granitemoe.py, granitemoeshared.py): every layer a FusedMoE of num_local_experts experts of
      intermediate_size (checkpoint input_linear / output_linear), a bias-free router; shared:
      a gated shared_mlp of shared_intermediate_size.
    * internlm / internlm2 / internlm3 (llama.py, internlm2.py): q/k/v (wqkv) and o biases from
      `bias`; `qkv_bias` overrides the q/k/v part (InternLM3).
    * baichuan (baichuan.py BaichuanForCausalLM): W_pack = fused q/k/v of an MHA; hidden_size
      4096 (Baichuan2-7B) uses RoPE, any other (13B) ALiBi — no rotary cache. NormHead only
      normalises the untied lm_head at load.
    * exaone (exaone.py): Llama under other names (num_layers read generically).
    * minicpm (minicpm.py): Llama + scale_emb / dim_model_base scalars; with num_experts, every
      MLP is num_experts experts of intermediate_size (MiniCPM-MoE).
    * phimoe (phimoe.py): LayerNorms with weight and bias, biased q/k/v and o, 16 experts top-2
      of intermediate_size with a bias-free router, an untied LM head with a bias.
    * phi3 / phimoe with longrope scaling (rotary_embedding Phi3LongRoPEScaledRotaryEmbedding):
      the cache holds the short and the long table, original + max_position_embeddings rows
      (rotary_embedding/phi3_long_rope_scaled_rope.py as of the releases that select the table
      with use_long_rope; earlier releases also kept the two tables registered as buffers,
      twice these bytes — not modelled per version).

    * minicpm3 (minicpm3.py, fam-c): MiniCPM's scalars, DeepSeek-V2-shaped attention projections
      (q_a / q_b, kv_a_proj_with_mqa / kv_b, o; ModelSpec.mla_projections) and a per-head K/V
      cache of qk_nope + qk_rope dims (read in _spec_from_config)."""
    family = spec.model_type
    if family not in LLAMA_VARIANT_FAMILIES and family != "internlm2" and family != "phi3":
        return spec
    r = _Reader(cfg, path)
    u: dict[str, Any] = {}
    if spec.rope_type == "longrope" and spec.max_position_embeddings:
        original = spec.rope_original_max_position or r.opt_int("original_max_position_embeddings")
        u["rope_cache_positions"] = spec.max_position_embeddings + (original or 0)
    if family == "gemma":
        u["tie_word_embeddings"] = True
    elif family in {"cohere", "cohere2"}:
        u.update(tie_word_embeddings=True, norms_per_layer=1, norm_bias=False)
        if r.bool("use_qk_norm", False):
            u.update(qk_norm=True, qk_norm_layout="per_head")
        if not spec.rope_type:
            u["rope_cache_positions"] = (r.opt_int("model_max_length")
                                         or r.opt_int("max_position_embeddings") or 8192)
        if family == "cohere2":
            explicit = cfg.get("layer_types")
            if not (isinstance(explicit, list) and len(explicit) == spec.num_layers):
                pattern = r.opt_int("sliding_window_pattern") or 4
                window = spec.sliding_window or r.opt_int("sliding_window")
                kinds = ["sliding" if (i + 1) % pattern else "full" for i in range(spec.num_layers)]
                u.update(layer_types=kinds if window and "sliding" in kinds else [],
                         sliding_window=window if window and "sliding" in kinds else None)
    elif family == "olmo":
        u["norm_weights"] = False
    elif family == "olmo2":
        u.update(qk_norm=True, qk_norm_layout="full_width")
    elif family in {"internlm", "internlm2", "internlm3"}:
        bias = r.bool("bias", False) or r.bool("attention_bias", False)
        u.update(qkv_bias=r.bool("qkv_bias", bias), o_bias=bias)
    elif family == "baichuan" and spec.hidden_size != 4096:
        u.update(rotary_dim=0, rope_cache_positions=0)  # ALiBi (Baichuan 13B)
    elif family == "baichuan" and not spec.max_position_embeddings:
        u["rope_cache_positions"] = 8192  # getattr(config, "max_position_embeddings", 8192)
    if family in {"granitemoe", "granitemoeshared", "phimoe"} or (
            family == "minicpm" and cfg.get("num_experts")):
        experts_key = "num_experts" if family == "minicpm" else "num_local_experts"
        shared = r.int("shared_intermediate_size", default=0) if family == "granitemoeshared" else 0
        u.update(intermediate_size=0, moe=MoeSpec(
            num_experts=r.int(experts_key), top_k=r.int("num_experts_per_tok"),
            expert_intermediate_size=r.int("intermediate_size"),
            shared_expert_intermediate_size=shared or 0, moe_layers=list(range(spec.num_layers))))
    if family == "phimoe":
        u.update(norm_bias=True, qkv_bias=True, o_bias=True, lm_head_bias=True)
    return spec.model_copy(update=u) if u else spec
