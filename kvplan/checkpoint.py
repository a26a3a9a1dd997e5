"""Safetensors headers: exact tensor shapes and dtypes without reading a byte of weights.

A safetensors file starts with an 8-byte little-endian header length N, then N bytes of JSON
mapping each tensor name to {"dtype", "shape", "data_offsets"} (plus an optional
"__metadata__" entry). Source: the safetensors format description,
https://github.com/huggingface/safetensors (README, "Format").

`attach_headers` decides whether the plan's weight bytes come from the config (exact vLLM
sharding and padding) or from the headers (exact bytes for formats the config cannot size).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from .errors import InvalidConfigError
from .specs import CheckpointTensors, ModelSpec, Problem
from .tensor_names import (  # noqa: F401 - re-exported for the readers' callers
    FLOAT_DTYPES,
    SAFETENSORS_DTYPE_BYTES,
    is_encoder,
    is_scale,
    layer_of,
    skipped_by_vllm,
)

# Bytes per element of each safetensors dtype (safetensors README, "dtype" list).
MAX_HEADER_BYTES = 100 * 2**20  # the safetensors reference reader's own limit
HEADER_AGREEMENT = 0.005  # issue 5: disagreement beyond 0.5 % → the headers win


def parse_header(data: bytes, *, where: str, file_size: int | None = None) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Tensor name → (dtype, shape) from the first bytes of a safetensors file.

    `data` must hold the 8-byte length and the whole JSON header."""
    if len(data) < 8:
        raise InvalidConfigError("truncated safetensors file (no header length)", path=where,
                                 hint="re-download the file; vLLM could not load it either")
    (length,) = struct.unpack("<Q", data[:8])
    if length > MAX_HEADER_BYTES or (file_size is not None and 8 + length > file_size):
        raise InvalidConfigError(f"corrupt safetensors header (claims {length} bytes)", path=where,
                                 hint="re-download the file; vLLM could not load it either")
    if len(data) < 8 + length:
        raise InvalidConfigError("truncated safetensors header", path=where,
                                 hint="re-download the file; vLLM could not load it either")
    try:
        raw = json.loads(data[8:8 + length])
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InvalidConfigError(f"corrupt safetensors header (not JSON: {e})", path=where,
                                 hint="re-download the file; vLLM could not load it either") from e
    if not isinstance(raw, dict):
        raise InvalidConfigError("corrupt safetensors header (not a JSON object)", path=where)
    return _tensor_table(raw, where)


def _tensor_table(raw: dict[str, Any], where: str) -> dict[str, tuple[str, tuple[int, ...]]]:
    out = {}
    for name, info in raw.items():
        if name == "__metadata__":
            continue
        dtype = info.get("dtype") if isinstance(info, dict) else None
        shape = info.get("shape") if isinstance(info, dict) else None
        if dtype not in SAFETENSORS_DTYPE_BYTES or not isinstance(shape, list) or not all(
                isinstance(d, int) and d >= 0 for d in shape):
            raise InvalidConfigError(f"tensor {name!r} has an unreadable dtype/shape "
                                     f"({dtype!r}, {shape!r})", path=where,
                                     hint="re-download the file; vLLM could not load it either")
        out[name] = (dtype, tuple(shape))
    return out


def read_file_header(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """The tensor table of one local .safetensors file (reads the header only)."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) == 8:
                head += f.read(min(struct.unpack("<Q", head)[0], MAX_HEADER_BYTES + 1))
    except OSError as e:
        raise InvalidConfigError(f"cannot read: {e.strerror}", path=str(path)) from e
    return parse_header(head, where=str(path), file_size=size)


def local_checkpoint(directory: Path) -> CheckpointTensors | None:
    """Headers of every safetensors shard in a model directory (the index's shards when a
    model.safetensors.index.json is present), or None when there are none."""
    index = directory / "model.safetensors.index.json"
    if index.exists():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
            files = sorted({directory / f for f in weight_map.values()})
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise InvalidConfigError(f"unreadable shard index ({e})", path=str(index),
                                     field="weight_map") from e
        missing = [f.name for f in files if not f.exists()]
        if missing:
            raise InvalidConfigError(f"shards listed in the index are missing: {', '.join(missing[:3])}"
                                     + (" …" if len(missing) > 3 else ""), path=str(index),
                                     hint="download the whole checkpoint, or point kvplan at "
                                     "config.json alone to plan from the config")
    else:
        files = sorted(directory.glob("*.safetensors"))
    if not files:
        return None
    tensors: dict[str, tuple[str, tuple[int, ...]]] = {}
    for f in files:
        tensors.update(read_file_header(f))
    return CheckpointTensors(source=f"{len(files)} local safetensors file(s)", files=len(files),
                             tensors=tensors)


# ------------------------------------------------------------- headers vs config

def header_parameter_count(m: ModelSpec, ckpt: CheckpointTensors) -> int:
    """Parameters held by every kept, non-scale tensor. Packed integer payloads are unpacked:
    an int32 word holds 32 / bits weights (AWQ/GPTQ qweight, compressed-tensors
    weight_packed), a uint8 byte two 4-bit weights (NVFP4 / MXFP4 blocks)."""
    bits = m.quantization.weight_bits if m.quantization else 4
    total = 0
    for name, (dtype, shape) in ckpt.tensors.items():
        if is_scale(name) or skipped_by_vllm(name, m):
            continue
        n = 1
        for d in shape:
            n *= d
        if dtype in {"I32", "U32"} and bits < 32:
            n *= 32 // bits
        elif dtype == "U8" and bits == 4:
            n *= 2
        total += n
    return total


def checkpoint_bytes(ckpt: CheckpointTensors) -> int:
    """Bytes of tensor data in the checkpoint files (what a download would fetch)."""
    total = 0
    for dtype, shape in ckpt.tensors.values():
        n = SAFETENSORS_DTYPE_BYTES[dtype]
        for d in shape:
            n *= d
        total += n
    return total


def attach_headers(m: ModelSpec, ckpt: CheckpointTensors, config_params: int) -> ModelSpec:
    """Choose where the weight bytes come from and say why.

    Headers win when the config's quantization is one kvplan cannot size, or when the
    config-derived parameter count is more than 0.5 % away from the headers' (vision towers,
    config quirks, extra heads). Otherwise the config enumeration is used, because it carries
    vLLM's exact sharding and padding."""
    header_params = header_parameter_count(m, ckpt)
    gap = abs(header_params - config_params) / max(config_params, 1)
    if m.unmodelled_quantization:
        gib = checkpoint_bytes(ckpt) / 2**30
        source, note = "headers", Problem(
            code="weights-from-headers", severity="info",
            message=f"{m.unmodelled_quantization}: weight bytes come from the safetensors headers "
            f"({ckpt.source}, {gib:.2f} GiB on disk), not from the config")
    elif gap > HEADER_AGREEMENT:
        source, note = "headers", Problem(
            code="config-disagrees-with-headers", severity="warning",
            message=f"the config describes {config_params:,} parameters but the safetensors headers "
            f"hold {header_params:,} ({gap:.1%} apart); weight bytes come from the headers")
    else:
        source, note = "config", Problem(
            code="headers-agree", severity="info",
            message=f"safetensors headers ({ckpt.source}) agree with the config within {gap:.2%}")
    return m.model_copy(update={"checkpoint": ckpt, "weights_from": source,
                                "problems": [*m.problems, note]})
