"""Raw Hugging Face config.json → ModelSpec. Every family quirk lives here, named.

Lenient on input (unknown keys are ignored), strict on what the math needs: a missing or
ill-typed required field raises InvalidConfigError naming the file and the field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import InvalidConfigError
from .specs import ModelSpec, MoeSpec, Problem, QuantSpec
from .units import DTYPE_ALIASES

# Keys vLLM reads for the default max_model_len (vllm/config/model.py
# `_get_and_verify_max_len`, 0.33.0): the minimum over those present.
MAX_LEN_KEYS = (
    "max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
    "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len",
)

# Families whose weights and attention kvplan models layer by layer.
LLAMA_LIKE = {"llama", "mistral", "qwen2", "qwen3", "phi3", "yi", "internlm2"}
MOE_FAMILIES = {"mixtral", "qwen3_moe", "qwen2_moe"}
KNOWN_FAMILIES = LLAMA_LIKE | MOE_FAMILIES | {"chatglm", "glm"}


def load_config_file(path: Path) -> dict[str, Any]:
    """Read a config.json, with errors that name the file and the line."""
    try:
        text = path.read_text()
    except OSError as e:
        raise InvalidConfigError(f"cannot read: {e.strerror}", path=str(path)) from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidConfigError(
            f"not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})", path=str(path),
            hint="check the file is the model's config.json",
        ) from e
    if not isinstance(data, dict):
        raise InvalidConfigError("expected a JSON object at the top level", path=str(path))
    return data


class _Reader:
    """Typed access to config fields, raising errors that name the field."""

    def __init__(self, cfg: dict[str, Any], path: str) -> None:
        self.cfg = cfg
        self.path = path

    def int(self, *keys: str, default: int | None = None, required: bool = True) -> int | None:
        for key in keys:
            if key in self.cfg and self.cfg[key] is not None:
                value = self.cfg[key]
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise InvalidConfigError(
                        f"expected a non-negative integer, got {value!r}", path=self.path, field=key
                    )
                return value
        if default is not None or not required:
            return default
        raise InvalidConfigError(
            "missing (needed to size the model)", path=self.path, field=" or ".join(keys),
            hint="kvplan needs the model's own config.json with its architecture fields",
        )

    def bool(self, key: str, default: bool) -> bool:
        value = self.cfg.get(key, default)
        return bool(value) if value is not None else default


def _dtype(cfg: dict[str, Any], path: str) -> str:
    raw = cfg.get("torch_dtype") or cfg.get("dtype") or "float32"
    dtype = DTYPE_ALIASES.get(str(raw).lower().replace("torch.", ""))
    if dtype is None:
        raise InvalidConfigError(f"unknown dtype {raw!r}", path=path, field="torch_dtype")
    return dtype


def _quantization(cfg: dict[str, Any], extra: dict[str, Any] | None,
                  path: str) -> tuple[QuantSpec | None, str | None]:
    """FP8 checkpoints (per-tensor/channel, 128×128 blocks, ModelOpt) → QuantSpec. Any other
    method → (None, its description): its bytes need the safetensors headers."""
    qc = cfg.get("quantization_config")
    if qc is None and extra is not None:  # ModelOpt: hf_quant_config.json beside config.json
        q = extra.get("quantization", {})
        if str(q.get("quant_algo", "")).upper() == "FP8":
            return QuantSpec(method="fp8", static_input_scale=True,
                             ignore=list(q.get("exclude_modules") or []), source="checkpoint"), None
        return None, f"weight quantization {q.get('quant_algo')!r} (hf_quant_config.json)"
    if qc is None:
        return None, None
    if not isinstance(qc, dict):
        raise InvalidConfigError("expected an object", path=path, field="quantization_config")
    method = str(qc.get("quant_method", "")).lower()
    if method == "fp8":
        block = qc.get("weight_block_size")
        return QuantSpec(
            method="fp8",
            block_size=tuple(block) if block else None,
            static_input_scale=qc.get("activation_scheme") == "static",
            ignore=list(qc.get("modules_to_not_convert") or qc.get("ignored_layers") or []),
            source="checkpoint",
        ), None
    if method == "compressed-tensors":
        groups = qc.get("config_groups") or {}
        weights = [g.get("weights") or {} for g in groups.values()]
        if weights and all(w.get("num_bits") == 8 and w.get("type") == "float" for w in weights):
            return QuantSpec(
                method="fp8",
                per_channel=all(w.get("strategy") == "channel" for w in weights),
                ignore=list(qc.get("ignore") or []),
                source="checkpoint",
            ), None
    return None, f"weight quantization {method or 'unknown'!r}"


def _rope(cfg: dict[str, Any]) -> tuple[str | None, float | None, int | None]:
    rs = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    if not isinstance(rs, dict):
        return None, None, None
    rtype = rs.get("rope_type") or rs.get("type")
    if rtype in (None, "default"):
        return None, None, None
    factor = rs.get("factor")
    original = rs.get("original_max_position_embeddings")
    return str(rtype), float(factor) if factor is not None else None, original


def _detect_unsupported(cfg: dict[str, Any], model_type: str) -> list[str]:
    """Layout features whose KV or weights kvplan does not model yet (never guess silently)."""
    found = []
    if "text_config" in cfg or "vision_config" in cfg:
        found.append("multimodal (vision tower and encoder profiling not modelled)")
    if cfg.get("kv_lora_rank"):
        found.append("MLA attention (latent KV cache)")
    layer_types = cfg.get("layer_types")
    sliding = cfg.get("sliding_window")
    if isinstance(layer_types, list) and any(t != "full_attention" for t in layer_types):
        found.append("per-layer attention types (sliding / linear layers)")
    elif sliding and cfg.get("use_sliding_window", True) is not False:
        found.append(f"sliding-window attention (window {sliding})")
    if cfg.get("attention_chunk_size"):
        found.append("chunked local attention")
    if any(k in cfg for k in ("full_attention_interval", "attn_layer_period", "hybrid_override_pattern",
                              "layers_block_type", "ssm_cfg", "mamba_d_state", "linear_num_key_heads")):
        found.append("hybrid Mamba / linear-attention layers")
    if model_type not in KNOWN_FAMILIES:
        found.append(f"model_type {model_type!r} not specifically modelled (assumed Llama-style)")
    return found


def spec_from_config(cfg: dict[str, Any], *, model_id: str, source: str, path: str = "config.json",
                     extra: dict[str, Any] | None = None) -> ModelSpec:
    """Normalise one HF config dict. `extra` is hf_quant_config.json when present."""
    model_type = str(cfg.get("model_type") or "")
    if not model_type:
        raise InvalidConfigError("missing", path=path, field="model_type",
                                 hint="is this a transformers config.json?")
    unsupported = _detect_unsupported(cfg, model_type)
    raw_cfg = cfg
    if "text_config" in cfg and isinstance(cfg["text_config"], dict):
        # Multimodal wrappers keep the language model under text_config (Llama 4, Gemma 3, …).
        cfg = {**cfg["text_config"], "torch_dtype": cfg.get("torch_dtype"),
               "quantization_config": cfg.get("quantization_config")}
    r = _Reader(cfg, path)

    if model_type in {"chatglm", "glm"}:
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
        head_dim = cfg.get("head_dim") or hidden_for_hd // heads
        vocab = r.int("vocab_size")
        intermediate = r.int("intermediate_size", default=0)
        qkv_bias = r.bool("attention_bias", model_type == "qwen2")  # Qwen2: q/k/v bias always
        o_bias = r.bool("attention_bias", False) if model_type != "qwen2" else False
        mlp_bias = r.bool("mlp_bias", False)
        rotary_dim = int(head_dim * float(cfg.get("partial_rotary_factor") or 1.0))
        tie = r.bool("tie_word_embeddings", False)
        qk_norm = model_type in {"qwen3", "qwen3_moe"}  # per-head q/k RMSNorm
    hidden = r.int("hidden_size", "n_embd")
    assert layers and heads and kv_heads and hidden and vocab is not None  # for type checkers
    if heads % kv_heads:
        raise InvalidConfigError(
            f"num_attention_heads ({heads}) is not a multiple of the KV heads ({kv_heads})",
            path=path, field="num_key_value_heads")

    moe = None
    if model_type == "mixtral":
        moe = MoeSpec(num_experts=r.int("num_local_experts"), top_k=r.int("num_experts_per_tok"),
                      expert_intermediate_size=intermediate, moe_layers=list(range(layers)))
    elif model_type in {"qwen3_moe", "qwen2_moe"} or cfg.get("num_experts"):
        step = r.int("decoder_sparse_step", default=1)
        dense = set(cfg.get("mlp_only_layers") or [])
        moe_layers = [i for i in range(layers) if i not in dense and (i + 1) % step == 0]
        shared = r.int("shared_expert_intermediate_size", default=0)
        moe = MoeSpec(num_experts=r.int("num_experts"), top_k=r.int("num_experts_per_tok"),
                      expert_intermediate_size=r.int("moe_intermediate_size"),
                      shared_expert_intermediate_size=shared, shared_expert_gate=shared > 0,
                      moe_layers=moe_layers)

    quant, unmodelled_quant = _quantization(cfg, extra, path)
    problems = []
    if cfg.get("auto_map") or "auto_map" in raw_cfg:
        problems.append(Problem(
            code="remote-code-not-run", severity="warning",
            message="this model needs trust_remote_code; kvplan read its config.json as data and "
            "never runs the repo's code, so layers defined only in that code are not seen"))
    rope_type, rope_factor, rope_original = _rope(cfg)
    max_pos = cfg.get("max_position_embeddings") or cfg.get("seq_length")
    # Rows of vLLM's shared cos/sin cache (get_rope): the max position, times the factor for
    # scalings that precompute the stretched range (linear, dynamic, yarn from the original).
    cache_rows = int(max_pos or 0)
    if rope_type in {"linear", "dynamic"} and rope_factor:
        cache_rows = int(cache_rows * rope_factor)
    elif rope_type == "yarn" and rope_factor:
        cache_rows = int((rope_original or cache_rows) * rope_factor)
    max_len_keys = {k: cfg[k] for k in MAX_LEN_KEYS
                    if isinstance(cfg.get(k), int) and not isinstance(cfg.get(k), bool)}

    return ModelSpec(
        id=model_id, model_type=model_type, architectures=list(cfg.get("architectures") or []),
        num_layers=layers, hidden_size=hidden, num_attention_heads=heads, num_kv_heads=kv_heads,
        head_dim=int(head_dim), vocab_size=vocab, intermediate_size=intermediate or 0,
        tie_word_embeddings=tie, qkv_bias=qkv_bias, o_bias=o_bias, mlp_bias=mlp_bias,
        qk_norm=qk_norm, moe=moe, dtype=_dtype(cfg, path), max_position_embeddings=max_pos,
        max_len_keys=max_len_keys, rope_type=rope_type, rope_factor=rope_factor,
        rope_original_max_position=rope_original, rotary_dim=rotary_dim,
        rope_cache_positions=cache_rows,
        quantization=quant, unmodelled_quantization=unmodelled_quant, unsupported=unsupported,
        problems=problems, source=source,
    )


def spec_from_path(path: Path) -> ModelSpec:
    """A local model directory (config.json inside) or a config.json file."""
    cfg_path = path / "config.json" if path.is_dir() else path
    if not cfg_path.exists():
        raise InvalidConfigError("no config.json in this directory", path=str(path),
                                 hint="point kvplan at the model directory or its config.json")
    cfg = load_config_file(cfg_path)
    extra_path = cfg_path.parent / "hf_quant_config.json"
    extra = load_config_file(extra_path) if extra_path.exists() else None
    model_id = str(cfg.get("_name_or_path") or cfg_path.parent.name or cfg_path.stem)
    if path.is_dir():
        model_id = path.name
    return spec_from_config(cfg, model_id=model_id, source=f"local file {cfg_path}",
                            path=str(cfg_path), extra=extra)
