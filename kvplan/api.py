"""The library entry points: resolve names (catalogue, local files, the Hub), then call the
pure planner. The only layer between users and the core that does I/O."""

from __future__ import annotations

from typing import Any

from .catalog import resolve_gpu, resolve_model
from .errors import InvalidInputError
from .knobs import Knobs
from .planner import plan as _plan
from .specs import GpuSpec, ModelSpec, Plan, Price, Workload


def plan(model: str | ModelSpec, gpu: str | GpuSpec, *, engine: str = "vllm",
         engine_version: str | None = None, workload: Workload | None = None,
         revision: str | None = None, token: str | None = None, offline: bool | None = None,
         gpu_hour_price: float | None = None, **knobs: Any) -> Plan:
    """Plan one deployment on `engine` (see `kvplan.engines.registry.NAMES`). `model` is a
    ModelSpec, a local path, a catalogue id or a Hub repo id (`revision`, `token`, `offline`
    apply to the Hub). `knobs` use vLLM's flag names with underscores (tensor_parallel_size=2,
    max_model_len=32768, …) plus gpu_memory_gib; each engine maps them to its own flags.
    `gpu_hour_price` (USD per GPU-hour) overrides the catalogue's default price.

    Raises KvplanError subclasses for bad input; a deployment that does not fit is a Plan with
    fits=False, not an exception."""
    k = Knobs.parse(knobs)
    m = model if isinstance(model, ModelSpec) else resolve_model(
        model, revision=revision, token=token, offline=offline)
    g = gpu if isinstance(gpu, GpuSpec) else resolve_gpu(gpu)
    return _plan(m, g, with_draft(k, token=token, offline=offline), engine=engine,
                 engine_version=engine_version, workload=workload, price=_price(g, gpu_hour_price))


def _price(gpu: GpuSpec, given: float | None) -> Price | None:
    """The user's price, else the catalogue's default for this GPU (with its source)."""
    if given is not None:
        if not (0 < given < 10_000) or given != given:
            raise InvalidInputError(f"--gpu-hour-price must be in (0, 10000) USD, got {given}")
        return Price(gpu_id=gpu.id, usd_per_hour=given, source="--gpu-hour-price", default=False)
    return None


def with_draft(k: Knobs, *, token: str | None = None, offline: bool | None = None) -> Knobs:
    """Knobs whose --speculative-config draft ("model": a catalogue id, local directory or Hub
    repo) is resolved to a ModelSpec, so the pure planner can size it. MTP and n-gram need none;
    a draft given as a ModelSpec already is kept."""
    sc = k.speculative_config
    if sc is None or sc.draft is not None or sc.model is None or sc.method in ("mtp", "ngram"):
        return k
    draft = resolve_model(sc.model, token=token, offline=offline)
    return k.model_copy(update={"speculative_config": sc.model_copy(update={"draft": draft})})
