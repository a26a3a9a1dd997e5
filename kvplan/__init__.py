"""kvplan: plan GPU memory and KV-cache capacity for LLM serving, as vLLM allocates it.

    >>> from kvplan import plan
    >>> p = plan("meta-llama/Llama-3.1-8B-Instruct", "h100-sxm-80gb", max_model_len=32768)
    >>> p.kv_cache.tokens, p.fits

The names below load on first use (PEP 562), so `import kvplan` and the CLI's start pay only
for what they use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import plan, sweep
    from .errors import (
        InvalidConfigError,
        InvalidInputError,
        KvplanError,
        UnavailableError,
        UnknownGpuError,
        UnknownModelError,
    )
    from .specs import Deployment, GpuSpec, ModelSpec, Plan, Workload

__all__ = [
    "plan", "sweep", "Plan", "ModelSpec", "GpuSpec", "Deployment", "Workload", "KvplanError",
    "UnknownModelError", "UnknownGpuError", "InvalidConfigError", "InvalidInputError",
    "UnavailableError",
]
__version__ = "0.1.0"

_HOME = {"plan": "api", "sweep": "api", "Plan": "specs", "ModelSpec": "specs", "GpuSpec": "specs",
         "Deployment": "specs", "Workload": "specs", "KvplanError": "errors",
         "UnknownModelError": "errors", "UnknownGpuError": "errors",
         "InvalidConfigError": "errors", "InvalidInputError": "errors",
         "UnavailableError": "errors"}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{home}"), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
