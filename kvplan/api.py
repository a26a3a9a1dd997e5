"""The library entry points: resolve names (catalogue, local files, the Hub), then call the
pure planner. The only layer between users and the core that does I/O."""

from __future__ import annotations

from typing import Any

from .catalog import gpu_specs, resolve_gpu, resolve_model
from .knobs import Knobs
from .planner import plan as _plan
from .specs import GpuSpec, ModelSpec, Plan, Workload


def plan(model: str | ModelSpec, gpu: str | GpuSpec, *, engine: str = "vllm",
         engine_version: str | None = None, workload: Workload | None = None,
         revision: str | None = None, token: str | None = None, offline: bool | None = None,
         minimize_utilization: bool = False, **knobs: Any) -> Plan:
    """Plan one deployment on `engine` (see `kvplan.engines.registry.NAMES`). `model` is a
    ModelSpec, a local path, a catalogue id or a Hub repo id (`revision`, `token`, `offline`
    apply to the Hub). `knobs` use vLLM's flag names with underscores (tensor_parallel_size=2,
    max_model_len=32768, …) plus gpu_memory_gib; each engine maps them to its own flags.
    `minimize_utilization`: recommend the smallest budget fraction that meets the workload
    instead of keeping the engine's default.

    Raises KvplanError subclasses for bad input; a deployment that does not fit is a Plan with
    fits=False, not an exception."""
    k = Knobs.parse(knobs)
    m = model if isinstance(model, ModelSpec) else resolve_model(
        model, revision=revision, token=token, offline=offline)
    g = gpu if isinstance(gpu, GpuSpec) else resolve_gpu(gpu)
    return _plan(m, g, k, engine=engine, engine_version=engine_version, workload=workload,
                 minimize_utilization=minimize_utilization, larger_gpus=larger_gpus(g))


def larger_gpus(g: GpuSpec) -> list[GpuSpec]:
    """Catalogue GPUs of the same vendor with at least 10 % more memory than `g`, smallest
    first: the "a larger GPU" alternative a plan that does not fit names."""
    total = g.cuda_total_bytes or 0
    return sorted((x for x in gpu_specs() if x.vendor == g.vendor and x.cuda_total_bytes
                   and x.cuda_total_bytes > 1.1 * total), key=lambda x: (x.cuda_total_bytes, x.id))
