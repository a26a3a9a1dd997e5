"""Byte units and dtype sizes. Integer bytes everywhere; convert only when rendering."""

from __future__ import annotations

from collections.abc import Callable

MiB = 1 << 20
GiB = 1 << 30

# Bytes per element of the dtypes vLLM accepts for weights and KV cache.
# `fp8` means e4m3 on CUDA (vllm/config/cache.py, 0.33.0).
DTYPE_BYTES: dict[str, int] = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
}

# Spellings seen in HF configs and on vLLM's command line, mapped to one name.
DTYPE_ALIASES: dict[str, str] = {
    "float": "float32",
    "fp32": "float32",
    "float32": "float32",
    "half": "float16",
    "fp16": "float16",
    "float16": "float16",
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
}


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative integers."""
    return -(-a // b)


def largest_true(pred: Callable[[int], bool], cap: int) -> int:
    """Largest k in 1…cap with pred(k), for a pred that is true up to some k and false after
    (0 if pred(1) is false): a binary search, O(log cap) calls."""
    lo, hi = 0, cap
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if pred(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo
