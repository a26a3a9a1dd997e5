"""TensorRT-LLM's --extra_llm_api_options / --config YAML (llmapi/llm_args.py): the fields that
move memory, checked with bounds and named errors. Pure: it reads the parsed document (the file
and its YAML are read by deploy.read_options_file); the engine math is engines/trtllm.py."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidConfigError
from .trtllm_features import DECODING_TYPES

# kv_cache_config.dtype values (llmapi/llm_args.py KvCacheConfig)
KV_CACHE_DTYPES = ("auto", "fp8", "int8", "float16", "bfloat16", "nvfp4")


# LLM API option (parse_options_document name) → kvplan knob.
OPTION_KNOBS = {
    "free_gpu_memory_fraction": "gpu_memory_utilization", "max_tokens": "max_total_tokens",
    "kv_cache_dtype": "kv_cache_dtype", "tokens_per_block": "block_size",
    "enable_block_reuse": "enable_prefix_caching", "max_batch_size": "max_num_seqs",
    "max_num_tokens": "max_num_batched_tokens", "max_seq_len": "max_model_len",
    "tensor_parallel_size": "tensor_parallel_size",
    "pipeline_parallel_size": "pipeline_parallel_size",
    # features (_speculative / _lora below; kv_cache_config.host_cache_size)
    "speculative_config": "speculative_config", "enable_lora": "enable_lora",
    "max_loras": "max_loras", "max_lora_rank": "max_lora_rank", "max_cpu_loras": "max_cpu_loras",
    "lora_target_modules": "lora_target_modules", "host_cache_size": "host_cache_size",
    # expert parallelism (trtllm_parallel.after_options folds these into kvplan's layout)
    "enable_attention_dp": "enable_dp_attention",
    "expert_parallel_size": "expert_parallel_size",
    "max_beam_width": "max_beam_width",
}


def knobs_from_options(options: dict[str, Any]) -> dict[str, Any]:
    """kvplan knobs from parsed --extra_llm_api_options (`parse_options_document`)."""
    return {OPTION_KNOBS[k]: v for k, v in options.items() if k in OPTION_KNOBS}




# (path in the YAML, kvplan name, type, lower bound, upper bound, bounds inclusive-low?)
_YAML_FIELDS: tuple[tuple[str, str, type, float | None, float | None], ...] = (
    ("kv_cache_config.free_gpu_memory_fraction", "free_gpu_memory_fraction", float, 0.0, 1.0),
    ("kv_cache_config.max_tokens", "max_tokens", int, 1, None),
    ("kv_cache_config.dtype", "kv_cache_dtype", str, None, None),
    ("kv_cache_config.enable_block_reuse", "enable_block_reuse", bool, None, None),
    ("kv_cache_config.tokens_per_block", "tokens_per_block", int, 1, None),
    ("kv_cache_config.max_gpu_total_bytes", "max_gpu_total_bytes", int, 0, None),
    ("kv_cache_config.host_cache_size", "host_cache_size", int, 0, 1 << 50),
    ("max_batch_size", "max_batch_size", int, 1, None),
    ("max_num_tokens", "max_num_tokens", int, 1, None),
    ("max_seq_len", "max_seq_len", int, 1, None),
    ("max_beam_width", "max_beam_width", int, 1, None),
    ("tensor_parallel_size", "tensor_parallel_size", int, 1, None),
    ("pipeline_parallel_size", "pipeline_parallel_size", int, 1, None),
    ("moe_expert_parallel_size", "expert_parallel_size", int, 1, None),
    ("enable_attention_dp", "enable_attention_dp", bool, None, None),
    ("backend", "backend", str, None, None),
)


def yaml_knob_fields() -> dict[str, str]:
    """kvplan knob → its field in the options YAML (kv_cache_dtype → kv_cache_config.dtype)."""
    return {OPTION_KNOBS[name]: path for path, name, *_ in _YAML_FIELDS if name in OPTION_KNOBS}


def _get(doc: dict[str, Any], path: str) -> tuple[bool, Any]:
    cur: Any = doc
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return False, None
        cur = cur[part]
    return True, cur


def parse_options_document(doc: Any, *, path: str | None = None) -> dict[str, Any]:
    """Option values found in a parsed --extra_llm_api_options / --config YAML document, by
    their LLM API name (free_gpu_memory_fraction, max_tokens, kv_cache_dtype, enable_block_reuse,
    tokens_per_block, max_batch_size, max_num_tokens, max_seq_len, tensor_parallel_size, …).
    Fields it does not know are ignored; a known field with a bad value raises
    InvalidConfigError naming it."""
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise InvalidConfigError("the top level must be a mapping of LLM API arguments", path=path)
    kvc = doc.get("kv_cache_config")
    if kvc is not None and not isinstance(kvc, dict):
        raise InvalidConfigError("must be a mapping (free_gpu_memory_fraction, max_tokens, "
                                 "dtype, …)",
                                 path=path, field="kv_cache_config")
    out: dict[str, Any] = {}
    for yaml_path, name, kind, lo, hi in _YAML_FIELDS:
        present, value = _get(doc, yaml_path)
        if not present or value is None:
            continue
        out[name] = _coerce(value, kind, lo, hi, yaml_path, path)
    if "kv_cache_dtype" in out and out["kv_cache_dtype"] not in KV_CACHE_DTYPES:
        raise InvalidConfigError(f"{out['kv_cache_dtype']!r} is not one of "
                                 f"{', '.join(KV_CACHE_DTYPES)}",
                                 path=path, field="kv_cache_config.dtype")
    if "backend" in out and out["backend"] not in ("pytorch", "tensorrt", "trt", "_autodeploy"):
        raise InvalidConfigError(f"{out['backend']!r} is not pytorch, tensorrt or _autodeploy",
                                 path=path, field="backend")
    out.update(_speculative(doc.get("speculative_config"), path))
    out.update(_lora(doc.get("lora_config"), path))
    return out


def _section(value: Any, name: str, path: str | None) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidConfigError("must be a mapping", path=path, field=name)
    return value


def _field(sec: dict[str, Any], section: str, key: str, kind: type, lo: float | None,
           path: str | None) -> Any:
    value = sec.get(key)
    return None if value is None else _coerce(value, kind, lo, None, f"{section}.{key}", path)


def _speculative(value: Any, path: str | None) -> dict[str, Any]:
    """speculative_config (llmapi/llm_args.py DecodingBaseConfig subclasses): decoding_type
    Eagle/Eagle3 (EAGLE-3), MTP, DraftTarget or NGram; max_draft_len;
    speculative_model_dir (or speculative_model); eagle3_one_model; num_nextn_predict_layers
    (MTP) → kvplan's speculative_config knob."""
    sec = _section(value, "speculative_config", path)
    if sec is None:
        return {}
    kind = _field(sec, "speculative_config", "decoding_type", str, None, path)
    if kind is None or kind.lower() not in DECODING_TYPES:
        raise InvalidConfigError(f"decoding_type {kind!r} is not one of Eagle, Eagle3, MTP, "
                                 "DraftTarget, NGram", path=path,
                                 field="speculative_config.decoding_type")
    method = DECODING_TYPES[kind.lower()]
    k = _field(sec, "speculative_config", "max_draft_len", int, 1, path)
    if method == "mtp":
        k = _field(sec, "speculative_config", "num_nextn_predict_layers", int, 1, path) or k
    model = (_field(sec, "speculative_config", "speculative_model_dir", str, None, path)
             or _field(sec, "speculative_config", "speculative_model", str, None, path))
    if method in ("eagle3", "draft_model") and model is None:
        raise InvalidConfigError(f"decoding_type {kind} needs the draft model", path=path,
                                 field="speculative_config.speculative_model_dir")
    if method != "mtp" and k is None:
        raise InvalidConfigError(f"decoding_type {kind} needs max_draft_len", path=path,
                                 field="speculative_config.max_draft_len")
    if k is not None and k > 64:
        raise InvalidConfigError(f"{k} draft tokens: kvplan takes at most 64", path=path,
                                 field="speculative_config.max_draft_len")
    spec: dict[str, Any] = {"method": method, "num_speculative_tokens": k}
    if model is not None and method != "mtp":
        spec["model"] = model
    one = _field(sec, "speculative_config", "eagle3_one_model", bool, None, path)
    if one is not None:
        spec["eagle3_one_model"] = one
    return {"speculative_config": spec}


def _lora(value: Any, path: str | None) -> dict[str, Any]:
    """lora_config (LoraConfig: max_lora_rank, max_loras, max_cpu_loras,
    lora_target_modules) → kvplan's LoRA knobs."""
    sec = _section(value, "lora_config", path)
    if sec is None:
        return {}
    out: dict[str, Any] = {"enable_lora": True}
    for key in ("max_lora_rank", "max_loras", "max_cpu_loras"):
        v = _field(sec, "lora_config", key, int, 1, path)
        if v is not None:
            out[key] = v
    modules = sec.get("lora_target_modules")
    if modules is not None:
        if not isinstance(modules, list) or not all(isinstance(x, str) for x in modules):
            raise InvalidConfigError(f"expected a list of module names, got {modules!r}", path=path,
                                     field="lora_config.lora_target_modules")
        out["lora_target_modules"] = tuple(modules)
    return out


def _coerce(value: Any, kind: type, lo: float | None, hi: float | None, field: str,
            path: str | None) -> Any:
    if kind is bool:
        if not isinstance(value, bool):
            raise InvalidConfigError(f"expected true or false, got {value!r}", path=path,
                                     field=field)
        return value
    if kind is str:
        if not isinstance(value, str):
            raise InvalidConfigError(f"expected a string, got {value!r}", path=path, field=field)
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidConfigError(f"expected a number, got {value!r}", path=path, field=field)
    if kind is int:
        if isinstance(value, float) and not value.is_integer():
            raise InvalidConfigError(f"expected a whole number, got {value!r}", path=path,
                                     field=field)
        value = int(value)
    else:
        value = float(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        bounds = f"between {lo:g} and {hi:g}" if hi is not None else f"at least {lo:g}"
        raise InvalidConfigError(f"{value!r} must be {bounds}", path=path, field=field)
    return value
