"""Raw Hugging Face config.json → ModelSpec: reads and bounds the file, hands the geometry to
the family's converter (families.py) and assembles what every family shares.

Lenient on input (unknown keys are ignored), strict on what the math needs: a missing or
ill-typed required field raises InvalidConfigError naming the file and the field. The only
module of the model room that reads files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import InvalidConfigError
from ..sources.limits import (
    MAX_CONFIG_BYTES,
    MAX_LAYERS,
    contained,
    loads_json,
    model_root,
    read_limited,
    short,
)
from ..specs import ModelSpec, Problem
from ..units import DTYPE_ALIASES
from .families import (
    KNOWN_FAMILIES,
    Context,
    Shape,
    converter,
    detect_unsupported,
    gated_deltanet,
    language_model,
    layer_types,
)
from .fields import MAX_LEN_KEYS, Reader
from .quant import quant_method_name, quantization
from .vision import vision


def load_config_file(path: Path) -> dict[str, Any]:
    """Read a config.json, with errors that name the file and the line."""
    data = loads_json(read_limited(path, MAX_CONFIG_BYTES, what="model config"), where=str(path))
    if not isinstance(data, dict):
        raise InvalidConfigError("expected a JSON object at the top level", path=str(path))
    return data


def _architectures(raw: dict[str, Any], path: str) -> list[str]:
    value = raw.get("architectures") or []
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise InvalidConfigError(f"expected a list of class names, got {short(value)}", path=path,
                                 field="architectures")
    return value


def _dtype(cfg: dict[str, Any], path: str) -> str:
    raw = cfg.get("torch_dtype") or cfg.get("dtype") or "float32"
    dtype = DTYPE_ALIASES.get(str(raw).lower().replace("torch.", ""))
    if dtype is None:
        raise InvalidConfigError(f"unknown dtype {raw!r}", path=path, field="torch_dtype")
    return dtype


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
    r = Reader(rs, path)
    try:
        factor = r.float("factor", lo=0.0, hi=1024.0)  # published factors: 2 to 64
        original = r.opt_int("original_max_position_embeddings")
    except InvalidConfigError as e:
        raise InvalidConfigError(e.message.split(": ", 2)[-1], path=path,
                                 field=f"{key}.{e.field}") from None
    return rtype, factor, original


def spec_from_config(cfg: dict[str, Any], *, model_id: str, source: str,
                     path: str = "config.json", extra: dict[str, Any] | None = None,
                     local_dir: str | None = None) -> ModelSpec:
    """Normalise one HF config dict. `extra` is hf_quant_config.json when present; `local_dir`
    the directory a launcher would be given (local models only).

    Every field the math reads is validated by fields.Reader (type, sign, upper bound); a value
    that still trips the spec models' own checks is reported with its field, never as an
    internal error."""
    from pydantic import ValidationError

    try:
        return _spec_from_config(cfg, model_id=model_id, source=source, path=path, extra=extra,
                                 local_dir=local_dir)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(x) for x in err["loc"])
        raise InvalidConfigError(f"{err['msg']} (as read into kvplan's model description)",
                                 path=path, field=field or None) from None
    except (TypeError, ArithmeticError, AttributeError, KeyError) as e:
        raise InvalidConfigError(
            f"a field has a value of the wrong type or range ({type(e).__name__})",
            path=path, hint="compare the file with the model's published config.json") from None


def _model_type(cfg: dict[str, Any], path: str) -> str:
    model_type = cfg.get("model_type") or ""
    if not isinstance(model_type, str) or len(model_type) > 64:
        raise InvalidConfigError(f"expected a short string, got {short(model_type)}", path=path,
                                 field="model_type")
    if not model_type:
        raise InvalidConfigError("missing", path=path, field="model_type",
                                 hint="is this a transformers config.json?")
    return model_type


def _check_geometry(s: Shape, path: str) -> None:
    if s.layers > MAX_LAYERS:  # every plan walks the layers: bound the work
        raise InvalidConfigError(
            f"{s.layers} layers is over kvplan's limit of {MAX_LAYERS}", path=path,
            field="num_hidden_layers",
            hint="the largest published models have ~130 layers; check the config")
    if s.heads % s.kv_heads:
        raise InvalidConfigError(
            f"num_attention_heads ({s.heads}) is not a multiple of the KV heads ({s.kv_heads})",
            path=path, field="num_key_value_heads")


def _rope_fields(cfg: dict[str, Any], r: Reader) -> dict[str, Any]:
    """RoPE scaling, the max-length keys and the rows of vLLM's shared cos/sin cache (get_rope):
    the max position, times the factor for scalings that precompute the stretched range
    (linear, dynamic, yarn from the original)."""
    rope_type, rope_factor, rope_original = _rope(cfg, r.path)
    # vLLM takes the minimum over these keys (a string there fails its comparison), so each
    # present one must be an integer: a quoted "131072" is refused, not silently skipped.
    max_len_keys = {k: r.check_int(k, cfg[k]) for k in MAX_LEN_KEYS if cfg.get(k) is not None}
    lengths = [v for v in (*max_len_keys.values(), rope_original) if v]
    if rope_factor and lengths and int(min(lengths) * rope_factor) < 1:
        key = "rope_scaling" if cfg.get("rope_scaling") else "rope_parameters"
        raise InvalidConfigError(
            f"a RoPE factor of {rope_factor:g} scales the {min(lengths):,}-token context to "
            "less than one token", path=r.path, field=f"{key}.factor",
            hint="published factors are 1 to 64 (a factor scales the context length)")
    max_pos = max_len_keys.get("max_position_embeddings") or max_len_keys.get("seq_length")
    cache_rows = int(max_pos or 0)
    if rope_type in {"linear", "dynamic"} and rope_factor:
        cache_rows = int(cache_rows * rope_factor)
    elif rope_type == "yarn" and rope_factor:
        cache_rows = int((rope_original or cache_rows) * rope_factor)
    return {"max_position_embeddings": max_pos, "max_len_keys": max_len_keys,
            "rope_type": rope_type, "rope_factor": rope_factor,
            "rope_original_max_position": rope_original, "rope_cache_positions": cache_rows}


def _remote_code(raw: dict[str, Any], cfg: dict[str, Any]) -> list[Problem]:
    if cfg.get("auto_map") or "auto_map" in raw:
        return [Problem(
            code="remote-code-not-run", severity="warning",
            message="this model needs trust_remote_code; kvplan read its config.json as data and "
            "never runs the repo's code, so layers defined only in that code are not seen")]
    return []


def _spec_from_config(raw: dict[str, Any], *, model_id: str, source: str, path: str,
                      extra: dict[str, Any] | None, local_dir: str | None = None) -> ModelSpec:
    """The family's converter reads the geometry (families.CONVERTERS); what every family
    shares — experts, per-layer kinds, quantization, RoPE, lengths, dtype, vision tower — is
    read here, then the family's fields, finishing hook and adjustment apply."""
    model_type = _model_type(raw, path)
    cfg, family = language_model(raw, model_type)
    r = Reader(cfg, path)
    c = Context(cfg=cfg, raw=raw, family=family, model_type=model_type, r=r)
    s = converter(family)(c)
    hidden = r.int("hidden_size", "n_embd", "d_model", "n_embed")
    _check_geometry(s, path)
    moe = (s.moe or _no_experts)(c, s.layers, s.intermediate)
    kinds, window, chunk = layer_types(s, cfg, s.layers, path)
    linear = (s.linear or gated_deltanet)(c) if "linear" in kinds else None
    unsupported = detect_unsupported(raw, cfg, family) + s.unsupported
    quant, unmodelled_quant = quantization(cfg, extra, path)
    problems = s.problems + _remote_code(raw, cfg)
    rope = _rope_fields(cfg, r)
    fields: dict[str, Any] = dict(
        id=model_id, model_type=family, architectures=_architectures(raw, path),
        num_layers=s.layers, hidden_size=hidden, num_attention_heads=s.heads,
        num_kv_heads=s.kv_heads, head_dim=int(s.head_dim), vocab_size=s.vocab,
        intermediate_size=0 if s.experts_only else s.intermediate,
        tie_word_embeddings=s.tie, qkv_bias=s.qkv_bias, o_bias=s.o_bias, mlp_bias=s.mlp_bias,
        qk_norm=s.qk_norm, moe=moe, layer_types=kinds, sliding_window=window,
        attention_chunk_size=chunk, mla=s.mla, mla_projections=s.mla_projections,
        linear_attention=linear, vision=vision(raw, model_type, hidden, path),
        dtype=_dtype(cfg, path), rotary_dim=s.rotary_dim, **rope,
        quantization=quant, unmodelled_quantization=unmodelled_quant,
        unmodelled_quantization_method=(quant_method_name(cfg, extra) if unmodelled_quant
                                        else None),
        unsupported=unsupported, problems=problems, source=source, local_dir=local_dir,
        layout_assumed=None if family in KNOWN_FAMILIES else family,
        # speculative decoding (docs/features.md): DeepSeek-V3-style MTP layers, EAGLE-3 heads
        mtp_layers=_positive_int(cfg.get("num_nextn_predict_layers")) or 0,
        draft_vocab_size=_positive_int(cfg.get("draft_vocab_size")),
    )
    fields.update(s.fields)
    if s.finish is not None:
        s.finish(fields)
    spec = ModelSpec(**fields)
    if s.adjust is not None:
        update = s.adjust(spec, Reader(raw, path))
        spec = spec.model_copy(update=update) if update else spec
    _check_experts(spec, cfg, path)
    return spec


TOP_K_KEYS = ("num_experts_per_tok", "experts_per_token", "moe_top_k", "top_k")


def _check_experts(spec: ModelSpec, cfg: dict[str, Any], path: str) -> None:
    """A token routed to more experts than the layer has cannot be built (the router's top-k
    over fewer logits fails in every engine)."""
    moe = spec.moe
    if moe is not None and moe.top_k > moe.num_experts:
        key = next((k for k in TOP_K_KEYS if k in cfg), TOP_K_KEYS[0])
        raise InvalidConfigError(
            f"{moe.top_k} experts per token is more than the {moe.num_experts} experts per "
            "layer", path=path, field=key, hint="check the expert counts in config.json")


def _no_experts(c: Context, layers: int, intermediate: int) -> None:
    return None

def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


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
