"""Byte units and dtype sizes (integer bytes everywhere; convert only when rendering), and two
small helpers the planning loops share."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

_C = TypeVar("_C", bound=type)

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


def fast_init(cls: _C) -> _C:
    """A frozen dataclass's __init__, rewritten to store its fields as one dict: the generated
    one calls object.__setattr__ once per field, about twice as slow, and a sweep's plan builds
    ~200 such fields. Same parameters, defaults, default factories and __post_init__; the
    instance stays frozen (assignment still raises FrozenInstanceError). Apply above
    @dataclass(frozen=True)."""
    fields = dataclasses.fields(cls)  # (InitVar pseudo-fields are not among them: refused)
    if (not cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
            or "__slots__" in cls.__dict__ or any(f.kw_only for f in fields)
            or vars(cls)["__init__"].__code__.co_argcount != 1 + sum(f.init for f in fields)):
        raise TypeError(f"fast_init: {cls.__name__} is not a plain frozen dataclass")
    ns: dict[str, Any] = {"_set": object.__setattr__, "_MISSING": dataclasses.MISSING}
    args, items = [], []
    for i, f in enumerate(fields):
        if f.default is not dataclasses.MISSING:
            ns[f"_d{i}"] = f.default
            value, arg = f.name, f"{f.name}=_d{i}"
        elif f.default_factory is not dataclasses.MISSING:
            ns[f"_f{i}"] = f.default_factory
            value, arg = f"_f{i}() if {f.name} is _MISSING else {f.name}", f"{f.name}=_MISSING"
        else:
            value, arg = f.name, f.name
        if f.init:
            args.append(arg)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            continue  # (set by __post_init__, as the generated __init__ leaves it)
        else:
            value = f"_d{i}" if f.default is not dataclasses.MISSING else f"_f{i}()"
        items.append(f"{f.name!r}: {value}")
    post = "\n    self.__post_init__()" if hasattr(cls, "__post_init__") else ""
    exec(f"def __init__(self, {', '.join(args)}):\n"  # noqa: S102 (code built from field names)
         f"    _set(self, '__dict__', {{{', '.join(items)}}}){post}\n", ns)
    init = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    type.__setattr__(cls, "__init__", init)
    return cls


def usd_per_million_tokens(per_hour: float | None, tokens_per_s: float | None) -> float | None:
    """USD per million output tokens: the hourly price ÷ (tokens/s × 3,600) × 10⁶; None without
    a price or a throughput."""
    if per_hour is None or not tokens_per_s:
        return None
    return per_hour / (tokens_per_s * 3600) * 1e6


def gib(n: float) -> str:
    """Bytes as GiB (2³⁰ B), two decimals, thousands separated: "1,234.50 GiB"."""
    return f"{n / GiB:,.2f} GiB"


def plain_number(v: float | None) -> str:
    """A setting's value as a launch line writes it: an integer whole (10485760, where %g gives
    1.04858e+07), any other number as %g (0.92); None as an em dash."""
    if v is None:
        return "—"
    return str(int(v)) if isinstance(v, int) or float(v).is_integer() else f"{v:g}"
