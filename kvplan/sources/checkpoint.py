"""Safetensors headers: exact tensor shapes and dtypes without reading a byte of weights.

A safetensors file starts with an 8-byte little-endian header length N, then N bytes of JSON
mapping each tensor name to {"dtype", "shape", "data_offsets"} (plus an optional
"__metadata__" entry). Source: the safetensors format description,
https://github.com/huggingface/safetensors (README, "Format").

`attach_headers` decides whether the plan's weight bytes come from the config (exact vLLM
sharding and padding) or from the headers (exact bytes for formats the config cannot size).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

from ..errors import InvalidConfigError
from ..model.tensor_names import SAFETENSORS_DTYPE_BYTES, is_scale, skipped_by_vllm
from ..specs import CheckpointTensors, ModelSpec, Problem
from .limits import (
    MAX_INDEX_BYTES,
    MAX_TENSOR_DIMS,
    MAX_TENSORS,
    contained,
    loads_json,
    model_root,
    open_regular,
    read_limited,
    short,
)

# Bytes per element of each safetensors dtype (safetensors README, "dtype" list).
MAX_HEADER_BYTES = 100 * 2**20  # the safetensors reference reader's own limit
HEADER_AGREEMENT = 0.005  # issue 5: disagreement beyond 0.5 % → the headers win
# headers holding under half the config's parameters are a partial checkpoint (missing shards,
# one file of several), not a smaller model: the engine fails loading the missing tensors
HEADER_PARTIAL = 0.5


def parse_header(data: bytes, *, where: str, file_size: int | None = None
                 ) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Tensor name → (dtype, shape) from the first bytes of a safetensors file.

    `data` must hold the 8-byte length and the whole JSON header."""
    if len(data) < 8:
        raise InvalidConfigError("truncated safetensors file (no header length)", path=where,
                                 hint="re-download the file; vLLM could not load it either")
    (length,) = struct.unpack("<Q", data[:8])
    if length > MAX_HEADER_BYTES or (file_size is not None and 8 + length > file_size):
        # The length field is not echoed: when the file is not a safetensors file at all, its
        # first 8 bytes are someone else's data (a token, a key), not a length.
        what = ("over the 100 MiB header limit" if length > MAX_HEADER_BYTES
                else "beyond the end of the file")
        raise InvalidConfigError(f"corrupt safetensors header (its length field is {what})",
                                 path=where,
                                 hint="re-download the file; vLLM could not load it either")
    if len(data) < 8 + length:
        raise InvalidConfigError("truncated safetensors header", path=where,
                                 hint="re-download the file; vLLM could not load it either")
    try:
        raw = loads_json(data[8:8 + length], where=where)
    except InvalidConfigError as e:
        raise InvalidConfigError(f"corrupt safetensors header ({e.detail})", path=where,
                                 hint="re-download the file; vLLM could not load it either"
                                 ) from None
    if not isinstance(raw, dict):
        raise InvalidConfigError("corrupt safetensors header (not a JSON object)", path=where)
    return _tensor_table(raw, where)


def _tensor_table(raw: dict[str, Any], where: str) -> dict[str, tuple[str, tuple[int, ...]]]:
    if len(raw) > MAX_TENSORS:
        raise InvalidConfigError(f"{len(raw):,} tensors is over kvplan's limit of {MAX_TENSORS:,}",
                                 path=where, hint="the largest published checkpoints hold ~100 k")
    out = {}
    for name, info in raw.items():
        if name == "__metadata__":
            continue
        dtype = info.get("dtype") if isinstance(info, dict) else None
        shape = info.get("shape") if isinstance(info, dict) else None
        if dtype not in SAFETENSORS_DTYPE_BYTES or not isinstance(shape, list) \
                or len(shape) > MAX_TENSOR_DIMS or not all(
                isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 2**48 for d in shape):
            raise InvalidConfigError(f"tensor {short(name, 80)} has an unreadable dtype/shape "
                                     f"({short(dtype, 20)}, {short(shape, 40)})", path=where,
                                     hint="re-download the file; vLLM could not load it either")
        out[name] = (dtype, tuple(shape))
    return out


def read_file_header(path: Path, *, root: Path | None = None,
                     own: bool = False) -> dict[str, tuple[str, tuple[int, ...]]]:
    """The tensor table of one local .safetensors file (reads the header only), opened under
    the containment rule (limits.open_regular: inside `root` and the boundary, a regular file,
    without blocking: a FIFO or a device named *.safetensors is refused)."""
    fd = open_regular(path, what="safetensors file", root=root, own=own)
    try:
        st = os.fstat(fd)
        with os.fdopen(os.dup(fd), "rb") as f:
            head = f.read(8)
            if len(head) == 8:
                claimed = struct.unpack("<Q", head)[0]
                if claimed <= min(MAX_HEADER_BYTES, st.st_size - 8):
                    head += f.read(claimed)
    except OSError as e:
        raise InvalidConfigError(f"cannot read: {e.strerror}", path=str(path)) from None
    finally:
        os.close(fd)
    return parse_header(head, where=str(path), file_size=st.st_size)


def local_checkpoint(directory: Path, *, own: bool = False) -> CheckpointTensors | None:
    """Headers of every safetensors shard in a model directory (the index's shards when a
    model.safetensors.index.json is present), or None when there are none.

    Every file read must resolve inside the directory (model_root): index entries that are
    absolute or climb out with ../, and shards that are symlinks to elsewhere, are refused.
    `own`: a snapshot in huggingface_hub's cache (limits.open_regular)."""
    root = model_root(directory)
    index = directory / "model.safetensors.index.json"
    if index.exists():
        contained(index, root, what="the shard index")
        doc = loads_json(read_limited(index, MAX_INDEX_BYTES, what="shard index", root=root,
                                      own=own),
                         where=str(index))
        weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
        try:
            names = set(weight_map.values()) if isinstance(weight_map, dict) else None
        except TypeError:  # unhashable shard names (arrays, objects)
            names = None
        if names is None:
            raise InvalidConfigError("expected an object mapping tensor names to shard file names",
                                     path=str(index), field="weight_map")
        if not all(isinstance(n, str) for n in names):
            raise InvalidConfigError("shard file names must be strings", path=str(index),
                                     field="weight_map")
        for n in names:
            if Path(n).is_absolute() or ".." in Path(n).parts:
                raise InvalidConfigError(f"shard {short(n, 120)} is not a file name inside the "
                                         "model directory", path=str(index), field="weight_map",
                                         hint="an index names its shards relative to its own "
                                         "folder")
        files = sorted(directory / n for n in names)
        missing = [f.name for f in files if not f.exists()]
        if missing:
            raise InvalidConfigError("shards listed in the index are missing: "
                                     f"{', '.join(missing[:3])}"
                                     + (" …" if len(missing) > 3 else ""), path=str(index),
                                     hint="download the whole checkpoint, or point kvplan at "
                                     "config.json alone to plan from the config")
    else:
        files = sorted(directory.glob("*.safetensors"))
    if not files:
        return None
    tensors: dict[str, tuple[str, tuple[int, ...]]] = {}
    for f in files:
        contained(f, root, what="shard")
        tensors.update(read_file_header(f, root=root, own=own))
        if len(tensors) > MAX_TENSORS:
            raise InvalidConfigError(f"over {MAX_TENSORS:,} tensors in the checkpoint",
                                     path=str(directory))
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

    Headers win when kvplan does not model the family layer by layer, when the config's
    quantization is one kvplan cannot size, or when the
    config-derived parameter count is more than 0.5 % away from the headers' (vision towers,
    config quirks, extra heads). Otherwise the config enumeration is used, because it carries
    vLLM's exact sharding and padding."""
    header_params = header_parameter_count(m, ckpt)
    gap = abs(header_params - config_params) / max(config_params, 1)
    if header_params < HEADER_PARTIAL * config_params:
        raise InvalidConfigError(
            f"the safetensors headers ({ckpt.source}) hold {header_params:,} parameters, "
            f"{header_params / max(config_params, 1):.1%} of the {config_params:,} the config "
            "describes: the checkpoint is incomplete, and the engine would fail loading the "
            "missing tensors", path=m.local_dir or m.id, field="safetensors",
            hint="check every shard is present (model.safetensors.index.json lists them), or "
            "plan the config alone from a directory without safetensors files")
    if m.layout_assumed:
        source, note = "headers", Problem(
            code="weights-from-headers", severity="info",
            message=f"model_type {m.layout_assumed!r}: weight bytes come from the safetensors "
            f"headers ({ckpt.source}, {header_params:,} parameters), not from an assumed layout")
    elif m.unmodelled_quantization:
        gib = checkpoint_bytes(ckpt) / 2**30
        source, note = "headers", Problem(
            code="weights-from-headers", severity="info",
            message=f"{m.unmodelled_quantization}: weight bytes come from the safetensors headers "
            f"({ckpt.source}, {gib:.2f} GiB on disk), not from the config")
    elif gap > HEADER_AGREEMENT:
        source, note = "headers", Problem(
            code="config-disagrees-with-headers", severity="warning",
            message=f"the config describes {config_params:,} parameters but the safetensors "
            f"headers hold {header_params:,} ({gap:.1%} apart); weight bytes come from the headers")
    else:
        source, note = "config", Problem(
            code="headers-agree", severity="info",
            message=f"safetensors headers ({ckpt.source}) agree with the config within {gap:.2%}")
    return m.model_copy(update={"checkpoint": ckpt, "weights_from": source,
                                "header_parameters": header_params,
                                "problems": [*m.problems, note]})
