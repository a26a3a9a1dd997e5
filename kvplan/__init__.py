"""kvplan: plan GPU memory and KV-cache capacity for LLM serving, as vLLM allocates it.

    >>> from kvplan import plan
    >>> p = plan("meta-llama/Llama-3.1-8B-Instruct", "h100-sxm-80gb", max_model_len=32768)
    >>> p.kv_cache.tokens, p.fits
"""

from .errors import (
    InvalidConfigError,
    InvalidInputError,
    KvplanError,
    UnavailableError,
    UnknownGpuError,
    UnknownModelError,
)
from .api import plan, sweep
from .specs import Deployment, GpuSpec, ModelSpec, Plan, Workload

__all__ = [
    "plan", "sweep", "Plan", "ModelSpec", "GpuSpec", "Deployment", "Workload", "KvplanError",
    "UnknownModelError", "UnknownGpuError", "InvalidConfigError", "InvalidInputError",
    "UnavailableError",
]
__version__ = "0.1.0"
