"""A checkpoint's weight format from config.json (quantization_config) or ModelOpt's
hf_quant_config.json → QuantSpec; the bytes per tensor follow in weights.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import InvalidConfigError
from ..sources.limits import short
from ..specs import QuantSpec


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
    if isinstance(value, bool) or not isinstance(value, int) or not (
            value == -1 or 1 <= value <= 2**20):
        raise InvalidConfigError(f"expected a positive group size (or -1), got {short(value)}",
                                 path=path, field=field)
    return value


def kv_cache_algo(q: dict[str, Any]) -> str | None:
    """The KV cache format a ModelOpt config declares, upper case ("FP8"), or None: the
    hf_quant_config.json form `kv_cache_quant_algo: "FP8"` or the config.json form
    `kv_cache_scheme: {"type": "float", "num_bits": 8}` (read the same way by vLLM's
    get_kv_cache_quant_algo_string, vllm/utils/torch_utils.py, and SGLang's
    ModelOptFp8Config/ModelOptFp4Config.from_config, srt/layers/quantization/modelopt_quant.py).
    A scheme of another width is returned by name (e.g. "FLOAT4"): no engine's auto reads it."""
    algo = q.get("kv_cache_quant_algo")
    if isinstance(algo, str) and algo.strip():
        return algo.strip().upper()
    scheme = q.get("kv_cache_scheme")
    if isinstance(scheme, dict) and scheme.get("type") == "float":
        return "FP8" if scheme.get("num_bits") == 8 else f"FLOAT{scheme.get('num_bits')}"
    if isinstance(scheme, str) and scheme.strip():
        return scheme.strip().upper()
    return None


def _modelopt(algo: Any, ignore: list[str], where: str,
              kv_algo: str | None = None) -> tuple[QuantSpec | None, str | None]:
    """A ModelOpt quant_algo (QuantSpec.from_modelopt); any other is not sized from the
    config."""
    spec = QuantSpec.from_modelopt(algo, ignore, source="checkpoint", kv_algo=kv_algo)
    return (spec, None) if spec else (None, f"weight quantization {algo!r} ({where})")


Found = tuple[QuantSpec | None, str | None]
QC_WEIGHTS = "quantization_config.config_groups.weights"


def quantization(cfg: dict[str, Any], extra: dict[str, Any] | None, path: str) -> Found:
    """The checkpoint's weight format → QuantSpec (bytes per tensor in weights.py). Formats not
    recognised → (None, their description): their bytes need the safetensors headers.

    Read from quantization_config (fp8, mxfp4, awq, gptq, compressed-tensors) or ModelOpt's
    hf_quant_config.json (FP8, NVFP4); ENGINE_MEMORY §1.8 lists what each keeps resident."""
    qc = cfg.get("quantization_config")
    if qc is None and extra is not None:  # ModelOpt: hf_quant_config.json beside config.json
        q = extra.get("quantization", {})
        if not isinstance(q, dict):
            raise InvalidConfigError("expected an object", path="hf_quant_config.json",
                                     field="quantization")
        ignore = _names(q.get("exclude_modules"), "hf_quant_config.json",
                        "quantization.exclude_modules")
        return _modelopt(q.get("quant_algo"), ignore, "hf_quant_config.json", kv_cache_algo(q))
    if qc is None:
        return None, None
    if not isinstance(qc, dict):
        raise InvalidConfigError("expected an object", path=path, field="quantization_config")
    method = str(qc.get("quant_method", "")).lower()
    skip = _names(qc.get("modules_to_not_convert") or qc.get("ignored_layers") or qc.get("ignore"),
                  path, "quantization_config.ignore")
    reader = METHODS.get(method)
    if reader is None:
        return None, f"weight quantization {method or 'unknown'!r}"
    return reader(qc, method, skip, path)


def _fp8(qc: dict[str, Any], method: str, skip: list[str], path: str) -> Found:
    block = _block(qc.get("weight_block_size"), path, "quantization_config.weight_block_size")
    return QuantSpec(
        method="fp8", block_size=block,
        static_input_scale=qc.get("activation_scheme") == "static", ignore=skip,
        source="checkpoint"), None


def _modelopt_in_config(qc: dict[str, Any], method: str, skip: list[str], path: str) -> Found:
    """Newer ModelOpt exports repeat hf_quant_config.json inside config.json (quant_algo,
    ignore): read them the same way (e.g. nvidia/MiniMax-M2.5-NVFP4)."""
    return _modelopt(qc.get("quant_algo"), skip, "modelopt", kv_cache_algo(qc))


def _fbgemm_fp8(qc: dict[str, Any], method: str, skip: list[str], path: str) -> Found:
    """vllm/model_executor/layers/quantization/fbgemm_fp8.py (v0.6–main): every LinearBase not
    in modules_to_not_convert gets an fp8 weight, one fp32 scale per output row and an fp32
    scalar input_scale_ub (activation_scale_ub); the LM head and embeddings stay 16-bit."""
    return QuantSpec(method="fp8", per_channel=True, static_input_scale=True, ignore=skip,
                     source="checkpoint"), None


def _mxfp4(qc: dict[str, Any], method: str, skip: list[str], path: str) -> Found:
    return QuantSpec(method="mxfp4", weight_bits=4, group_size=32, experts_only=True,
                     ignore=skip, source="checkpoint"), None


def _awq_gptq(qc: dict[str, Any], method: str, skip: list[str], path: str) -> Found:
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


def _weight_groups(qc: dict[str, Any], path: str) -> list[dict[str, Any]]:
    """compressed-tensors config_groups → each group's "weights" scheme."""
    groups = qc.get("config_groups") or {}
    if not isinstance(groups, dict) or not all(
            isinstance(g, dict) and isinstance(g.get("weights") or {}, dict)
            for g in groups.values()):
        raise InvalidConfigError("expected an object of {\"weights\": {…}} groups", path=path,
                                 field="quantization_config.config_groups")
    return [g.get("weights") or {} for g in groups.values()]


def _compressed_tensors(qc: dict[str, Any], method: str, skip: list[str], path: str) -> Found:
    weights = _weight_groups(qc, path)
    if not weights:
        return None, "compressed-tensors without weight groups"
    w = weights[0]
    bits, kind, strategy = w.get("num_bits"), w.get("type"), w.get("strategy")
    block_structure = _block(w.get("block_structure"), path, f"{QC_WEIGHTS}.block_structure")
    w_group = _group(w.get("group_size"), path, f"{QC_WEIGHTS}.group_size", None)
    if not all((x.get("num_bits"), x.get("type")) == (bits, kind) for x in weights):
        return None, f"compressed-tensors weights {bits}-bit {kind} ({strategy})"
    if bits == 8 and kind == "float":
        return QuantSpec(method="fp8",
                         per_channel=all(x.get("strategy") == "channel" for x in weights),
                         block_size=block_structure, ignore=skip, source="checkpoint"), None
    if bits == 8 and kind == "int":
        return QuantSpec(method="int8", per_channel=strategy == "channel", ignore=skip,
                         source="checkpoint"), None
    if bits == 4 and kind == "float":  # nvfp4: e2m1 + fp8 scale per 16
        return QuantSpec(method="nvfp4", weight_bits=4, group_size=w_group or 16,
                         ignore=skip, source="checkpoint"), None
    if bits in (4, 8) and kind == "int":  # pack-quantized w4a16 / w8a16
        return QuantSpec(method="w4a16", weight_bits=bits,
                         group_size=w_group if strategy == "group" else None,
                         zero_points=not w.get("symmetric", True),
                         act_order=bool(w.get("actorder")), ignore=skip,
                         source="checkpoint"), None
    return None, f"compressed-tensors weights {bits}-bit {kind} ({strategy})"


METHODS: dict[str, Callable[[dict[str, Any], str, list[str], str], Found]] = {
    "fp8": _fp8, "modelopt": _modelopt_in_config, "fbgemm_fp8": _fbgemm_fp8, "mxfp4": _mxfp4,
    "awq": _awq_gptq, "gptq": _awq_gptq, "compressed-tensors": _compressed_tensors,
}


def quant_method_name(cfg: dict[str, Any], extra: dict[str, Any] | None) -> str | None:
    """The method an engine detects for a quantization kvplan cannot size from the config:
    quantization_config.quant_method, else hf_quant_config.json's quant_algo (lowercased)."""
    q = cfg.get("quantization_config")
    if isinstance(q, dict) and isinstance(q.get("quant_method"), str):
        return q["quant_method"].lower()
    algo = (extra or {}).get("quantization", {}) if isinstance(extra, dict) else {}
    name = algo.get("quant_algo") if isinstance(algo, dict) else None
    return name.lower() if isinstance(name, str) else None
