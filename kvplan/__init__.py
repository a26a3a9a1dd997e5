"""kvplan: plan GPU memory and KV-cache capacity for LLM serving, as vLLM allocates it.

    >>> from kvplan import plan
    >>> p = plan("meta-llama/Llama-3.1-8B-Instruct", "h100-sxm-80gb", max_model_len=32768)
    >>> p.kv_cache.tokens, p.fits
"""

from . import sweep as _sweep_module  # noqa: F401 - loaded first, so `kvplan.sweep` below
from .api import plan, sweep  # stays the function (a later `import kvplan.sweep` keeps it)
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
