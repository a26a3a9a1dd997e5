"""From model + GPU + knobs to one Plan: fit, capacity, recommendations, serve command."""

from __future__ import annotations

import math
import shlex
from typing import Any

from .catalog import resolve_gpu, resolve_model
from .engines import vllm
from .errors import InvalidInputError
from .specs import (
    Deployment,
    GpuSpec,
    KvCache,
    MemoryBreakdown,
    ModelSpec,
    Plan,
    PlanEngine,
    PlanGpu,
    PlanModel,
    Problem,
    Recommendation,
    Recommendations,
    SourcedValue,
    StageBreakdown,
    Workload,
)
from .units import GiB
from .weights import parameter_count

KNOB_NAMES = (
    "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "max_model_len",
    "max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization", "dtype", "kv_cache_dtype",
    "quantization", "block_size", "enforce_eager", "kv_cache_memory_bytes", "gpu_memory_gib",
    "enable_prefix_caching", "disable_hybrid_kv_cache_manager", "enable_expert_parallel",
    "usage_context", "max_input_tokens",
)


def _evaluate(m: ModelSpec, gpu: GpuSpec, opts: dict[str, Any], era: vllm.Era, version: str,
              version_source: Any) -> tuple[Deployment, vllm.VllmResult, int]:
    dep, quant = vllm.resolve_deployment(m, gpu, opts, era, version, version_source)
    model_max = vllm.derived_max_model_len(m, era)[0]
    return dep, vllm.plan_memory(m, gpu, dep, quant, era, model_max), model_max


def _null(era: vllm.Era) -> int:
    return 1 if era.null_block_in_fit_check else 0


def _util_needed(dep: Deployment, res: vllm.VllmResult, blocks_needed: int) -> float:
    """Smallest utilization (2 decimals, rounded up) whose budget holds blocks_needed blocks on
    every PP stage: (non-KV + blocks × bytes_per_block) / total."""
    need = 0
    for st in res.stages:
        non_kv = st.weights_bytes + st.activation_bytes + st.non_torch_bytes
        if res.era.cudagraph_in_budget:
            non_kv += st.cudagraph_bytes
        need = max(need, non_kv + blocks_needed * st.bytes_per_block)
    return math.ceil(need / dep.gpu_total_bytes * 100) / 100


def _util_ceiling(dep: Deployment, res: vllm.VllmResult) -> float:
    """Largest utilization that still starts: free memory after the CUDA context must cover the
    budget, and (in eras that do not budget CUDA graphs) the graphs must fit outside it."""
    outside = vllm.STARTUP_OVERHEAD_BYTES
    if not res.era.cudagraph_in_budget:
        outside += max(st.cudagraph_bytes for st in res.stages)
    return math.floor((dep.gpu_total_bytes - outside) / dep.gpu_total_bytes * 100) / 100


def _recommend(m: ModelSpec, gpu: GpuSpec, opts: dict[str, Any], era: vllm.Era, version: str,
               version_source: Any, dep: Deployment, res: vllm.VllmResult, model_max: int,
               workload: Workload) -> Recommendations:
    # tensor_parallel_size
    tp = dep.tensor_parallel_size
    if res.fits:
        rec_tp = Recommendation(value=tp, reason=f"fits at tensor_parallel_size {tp}")
    else:
        found = None
        for cand in vllm.valid_tp_sizes(m):
            if cand <= tp:
                continue
            _, r2, _ = _evaluate(m, gpu, {**opts, "tensor_parallel_size": cand}, era, version,
                                 version_source)
            if r2.fits:
                found = cand
                break
        rec_tp = (Recommendation(value=found, reason=f"smallest valid tensor_parallel_size that fits "
                                 f"({found} GPUs per replica)") if found else
                  Recommendation(value=None, reason="no valid tensor_parallel_size up to 64 fits"))
    prefix = ""
    if rec_tp.value and rec_tp.value != tp and res.max_model_len_fit == 0:
        # Nothing fits at this TP (no KV memory at all): the other settings only make sense on
        # the deployment that does, so re-plan at that TP. Otherwise a shorter length and a
        # larger TP are alternatives, and the command keeps the user's TP.
        opts = {**opts, "tensor_parallel_size": rec_tp.value}
        dep, res, model_max = _evaluate(m, gpu, opts, era, version, version_source)
        prefix = f"at tensor_parallel_size {rec_tp.value}: "

    null = _null(era)
    usable = max(0, res.num_blocks - null)
    n = workload.target_concurrency

    # max_model_len: with a target but no workload length, the largest length at which N
    # requests fit; otherwise the configured length when one request fits, else vLLM's estimate.
    work_len = (workload.avg_input_tokens or 0) + (workload.avg_output_tokens or 0)
    if n and not work_len:
        length = vllm.largest_fitting_len(lambda k: n * res.request_blocks(k) <= usable, model_max)
        if length <= 0:
            rec_len = Recommendation(value=None, reason=f"the KV cache ({usable} blocks) cannot hold "
                                     f"{n} requests of even one block each")
        else:
            rec_len = Recommendation(value=length, reason=f"largest length at which {n} concurrent "
                                     f"requests fit: {n} × {res.request_blocks(length)} blocks ≤ "
                                     f"{usable} usable blocks")
    elif res.fits:
        rec_len = Recommendation(value=dep.max_model_len, reason=f"one {dep.max_model_len}-token "
                                 f"request fits; the KV cache holds {res.max_concurrency:.2f} of them")
    elif res.max_model_len_fit > 0:
        rec_len = Recommendation(value=res.max_model_len_fit, reason="the configured length does not "
                                 "fit; this is the largest that does (vLLM's estimated maximum model length)")
    else:
        rec_len = Recommendation(value=None, reason="no length fits: there is no memory for the KV cache")

    # gpu_memory_utilization
    ceiling = _util_ceiling(dep, res)
    max_len = int(rec_len.value or dep.max_model_len)
    target_len = work_len or max_len
    seq_cap = vllm.batch_defaults(dep.gpu_total_bytes, gpu.device_name, era,
                                  opts.get("usage_context") or "serve")[1]
    one = res.request_blocks(max_len)
    if n:
        # N requests of the workload's length, and always one request of max_model_len.
        blocks_needed = max(n * res.request_blocks(target_len), one) + null
        target = f"{n} requests of {target_len} tokens"
    else:
        blocks_needed = one + null
        target = f"one {max_len}-token request"
    needed = _util_needed(dep, res, blocks_needed)
    if dep.kv_cache_memory_bytes is not None:
        rec_util = Recommendation(value=dep.gpu_memory_utilization, reason="--kv-cache-memory-bytes "
                                  "replaces the utilization budget")
    elif needed <= ceiling:
        if n or not res.fits:
            rec_util = Recommendation(value=needed, reason=f"smallest value that serves {target}; "
                                      f"values up to {ceiling} start safely and add KV capacity")
        else:
            rec_util = Recommendation(value=dep.gpu_memory_utilization, reason=f"{target} needs "
                                      f"{needed} or more; the current value leaves the rest to "
                                      f"concurrency; {ceiling} is the highest that starts safely")
    else:
        alternatives = _what_would_serve(m, gpu, opts, era, version, version_source, dep,
                                         n or 1, target_len, ceiling)
        rec_util = Recommendation(value=ceiling, reason=f"{target} needs {needed}, above the "
                                  f"{ceiling} at which vLLM still starts; {alternatives}")

    # max_num_seqs
    if work_len:
        basis, what = work_len, f"the workload's {work_len} tokens per request (input + output)"
    else:
        basis = int(rec_len.value or dep.max_model_len)
        what = (f"max_model_len {basis} for every request — the no-preemption bound; pass "
                "--avg-input-tokens/--avg-output-tokens for a realistic figure")
    if n and rec_util.value and rec_util.value != dep.gpu_memory_utilization:
        # With a target, size the batch at the recommended utilization the command will use.
        _, at_util, _ = _evaluate(m, gpu, {**opts, "gpu_memory_utilization": rec_util.value}, era,
                                  version, version_source)
        usable = max(0, at_util.num_blocks - null)
    fit_seqs = usable // res.request_blocks(basis)
    rec_seqs = Recommendation(
        value=min(fit_seqs, seq_cap),
        reason=f"the KV cache holds {fit_seqs} requests at {what}"
        + (f", capped at the engine's limit of {seq_cap} for this GPU" if fit_seqs > seq_cap else ""),
    )

    for rec in (rec_len, rec_seqs, rec_util):
        rec.reason = prefix + rec.reason
    return Recommendations(max_model_len=rec_len, max_num_seqs=rec_seqs,
                           gpu_memory_utilization=rec_util, tensor_parallel_size=rec_tp)


def _what_would_serve(m: ModelSpec, gpu: GpuSpec, opts: dict[str, Any], era: vllm.Era,
                      version: str, version_source: Any, dep: Deployment, n: int, length: int,
                      ceiling: float) -> str:
    """Name the changes that would meet the target at the highest safe utilization."""
    base = {**opts, "gpu_memory_utilization": ceiling}
    _, r, model_max = _evaluate(m, gpu, base, era, version, version_source)
    options = []
    usable = max(0, r.num_blocks - _null(era))
    fit_len = vllm.largest_fitting_len(lambda k: n * r.request_blocks(k) <= usable, model_max)
    if fit_len > 0:
        options.append(f"--max-model-len {fit_len}")
    for cand in vllm.valid_tp_sizes(m):
        if cand <= dep.tensor_parallel_size:
            continue
        _, r2, _ = _evaluate(m, gpu, {**base, "tensor_parallel_size": cand}, era, version,
                             version_source)
        if r2.num_blocks - _null(era) >= n * r2.request_blocks(length):
            options.append(f"--tensor-parallel-size {cand}")
            break
    if not dep.kv_cache_dtype.startswith("fp8"):
        _, r3, _ = _evaluate(m, gpu, {**base, "kv_cache_dtype": "fp8"}, era, version, version_source)
        if r3.num_blocks - _null(era) >= n * r3.request_blocks(length):
            options.append("--kv-cache-dtype fp8")
    return ("it would be met with " + " or ".join(options)) if options else \
        "no single change (shorter length, more GPUs, fp8 KV cache) meets it"


def serve_command(model_ref: str, dep: Deployment, rec: Recommendations, workload: Workload,
                  revision: str | None = None) -> str:
    """`vllm serve` with the user's explicit flags and the recommended values. max_num_seqs is
    only set from a workload: the no-preemption bound alone would throttle short requests."""
    args = ["vllm", "serve", model_ref]
    if revision:
        args += ["--revision", revision]
    tp = dep.tensor_parallel_size
    if rec.max_model_len.reason.startswith("at tensor_parallel_size"):
        tp = rec.tensor_parallel_size.value or tp  # the other values were planned at this TP
    if tp != 1:
        args += ["--tensor-parallel-size", str(tp)]
    for key, flag in (("pipeline_parallel_size", "--pipeline-parallel-size"),
                      ("data_parallel_size", "--data-parallel-size")):
        value = getattr(dep, key)
        if value != 1:
            args += [flag, str(value)]
    if rec.max_model_len.value:
        args += ["--max-model-len", str(rec.max_model_len.value)]
    has_workload = any(v is not None for v in workload.model_dump().values())
    if rec.max_num_seqs.value and (has_workload or dep.sources.get("max_num_seqs") == "cli"):
        args += ["--max-num-seqs", str(rec.max_num_seqs.value)]
    if dep.kv_cache_memory_bytes is not None:
        args += ["--kv-cache-memory-bytes", str(dep.kv_cache_memory_bytes)]
    elif rec.gpu_memory_utilization.value:
        args += ["--gpu-memory-utilization", f"{rec.gpu_memory_utilization.value:g}"]
    src = dep.sources
    if src.get("max_num_batched_tokens") == "cli":
        args += ["--max-num-batched-tokens", str(dep.max_num_batched_tokens)]
    if src.get("dtype") == "cli":
        args += ["--dtype", dep.dtype]
    if src.get("kv_cache_dtype") == "cli" and dep.kv_cache_dtype.startswith("fp8"):
        args += ["--kv-cache-dtype", dep.kv_cache_dtype]
    if src.get("quantization") == "cli" and dep.quantization:
        args += ["--quantization", dep.quantization]
    if src.get("block_size") == "cli":
        args += ["--block-size", str(dep.block_size)]
    if dep.enforce_eager:
        args.append("--enforce-eager")
    if dep.enable_expert_parallel:
        args.append("--enable-expert-parallel")
    if src.get("enable_prefix_caching") == "cli" and not dep.enable_prefix_caching:
        args.append("--no-enable-prefix-caching")
    if src.get("hybrid_kv_cache_manager") == "cli" and not dep.hybrid_kv_cache_manager:
        args.append("--disable-hybrid-kv-cache-manager")
    return shlex.join(args)


ENGINES = ("vllm", "sglang", "tgi")
VLLM_KNOBS = {k: "--" + k.replace("_", "-") for k in (
    "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "max_model_len",
    "max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization", "kv_cache_dtype", "dtype",
    "quantization")}


def plan(model: str | ModelSpec, gpu: str | GpuSpec, *, engine: str = "vllm",
         engine_version: str | None = None,
         workload: Workload | None = None, revision: str | None = None, token: str | None = None,
         offline: bool | None = None, **knobs: Any) -> Plan:
    """Plan one deployment on `engine` (vllm, sglang or tgi). `model` is a ModelSpec, a local path, a catalogue id or a Hub
    repo id (`revision`, `token`, `offline` apply to the Hub). `knobs` use vLLM's flag names
    with underscores (tensor_parallel_size=2, max_model_len=32768, …) plus gpu_memory_gib.

    Raises KvplanError subclasses for bad input; a deployment that does not fit is a Plan with
    fits=False, not an exception."""
    unknown = set(knobs) - set(KNOB_NAMES)
    if unknown:
        raise TypeError(f"unknown knobs: {', '.join(sorted(unknown))}")
    m = model if isinstance(model, ModelSpec) else resolve_model(
        model, revision=revision, token=token, offline=offline)
    g = gpu if isinstance(gpu, GpuSpec) else resolve_gpu(gpu)
    workload = workload or Workload()
    if engine not in ENGINES:
        raise InvalidInputError(f"unknown --engine {engine!r}", hint="use vllm, sglang or tgi")
    if engine != "vllm":
        from .planner_engines import plan_other

        return plan_other(engine, m, g, engine_version=engine_version, workload=workload,
                          opts={k: v for k, v in knobs.items() if v is not None})
    if knobs.get("max_input_tokens") is not None:
        raise InvalidInputError("max_input_tokens is a TGI setting (--max-input-tokens) that vLLM "
                                "does not have", hint="plan with --engine tgi (engine='tgi'), or use --max-model-len")
    version = engine_version or vllm.NEWEST_MODELLED
    version_source = "cli" if engine_version else "kvplan-default"
    era, problems = vllm.select_era(version)
    opts = {k: v for k, v in knobs.items() if v is not None}
    dep, res, model_max = _evaluate(m, g, opts, era, version, version_source)

    problems += res.problems + model_gpu_problems(m, g, dep, engine="vLLM")
    rec = _recommend(m, g, opts, era, version, version_source, dep, res, model_max, workload)
    worst = res.worst
    estimated = ["activation_bytes", "non_torch_bytes", "cudagraph_bytes"]
    if g.cuda_total_estimated and dep.sources.get("gpu_total_bytes") != "cli":
        estimated.append("total_bytes")
    inputs = {k: SourcedValue(value=getattr(dep, k), source=dep.sources.get(k, "engine-default"))
              for k in ("engine_version", "tensor_parallel_size", "pipeline_parallel_size",
                        "data_parallel_size", "dtype", "kv_cache_dtype", "quantization",
                        "max_model_len", "max_num_seqs", "max_num_batched_tokens",
                        "gpu_memory_utilization", "block_size", "enforce_eager",
                        "enable_prefix_caching", "hybrid_kv_cache_manager", "enable_expert_parallel",
                        "kv_cache_memory_bytes", "gpu_total_bytes")}
    return Plan(
        fits=res.fits,
        problems=problems,
        model=PlanModel(id=m.id, source=m.source, parameters=parameter_count(m),
                        weights_from=m.weights_from, dtype=dep.dtype,
                        quantization=dep.quantization or _quant_name(m)),
        gpu=PlanGpu(id=g.id, name=g.name,
                    count=dep.tensor_parallel_size * dep.pipeline_parallel_size * dep.data_parallel_size,
                    total_bytes_estimated="total_bytes" in estimated),
        engine=PlanEngine(name="vllm", version=version, era=era.name, knobs=VLLM_KNOBS),
        inputs=inputs,
        workload=workload,
        memory=MemoryBreakdown(
            total_bytes=dep.gpu_total_bytes, budget_bytes=res.requested_bytes,
            weights_bytes=worst.weights_bytes, weights_tensor_bytes=worst.weights_tensor_bytes,
            activation_bytes=worst.activation_bytes,
            non_torch_bytes=worst.non_torch_bytes, cudagraph_bytes=worst.cudagraph_bytes,
            cudagraph_in_budget=era.cudagraph_in_budget and not dep.enforce_eager,
            kv_cache_bytes=worst.kv_cache_bytes, estimated=estimated,
            stages=[StageBreakdown(layers=st.layers, weights_bytes=st.weights_bytes,
                                   weights_tensor_bytes=st.weights_tensor_bytes,
                                   activation_bytes=st.activation_bytes,
                                   non_torch_bytes=st.non_torch_bytes,
                                   cudagraph_bytes=st.cudagraph_bytes,
                                   kv_cache_bytes=st.kv_cache_bytes, num_blocks=st.num_blocks)
                    for st in res.stages]),
        kv_cache=KvCache(
            bytes_per_token=res.bytes_per_token, bytes_per_block=worst.bytes_per_block,
            bytes_per_request=res.blocks_per_request * worst.bytes_per_block,
            block_size=worst.layout.block_size, num_blocks=res.num_blocks, tokens=res.tokens,
            max_concurrency=round(res.max_concurrency, 2), max_model_len_fit=res.max_model_len_fit),
        recommendations=rec,
        command=serve_command(_serve_ref(m), dep, rec, workload, revision=m.revision),
    )


def model_gpu_problems(m: ModelSpec, g: GpuSpec, dep: Deployment, *, engine: str) -> list[Problem]:
    """Notes that do not depend on the engine's arithmetic: the model's own, unsupported
    layouts, quantization that needs the checkpoint, estimated GPU totals, non-CUDA GPUs."""
    problems = list(m.problems)
    if m.vision is not None:
        problems.append(Problem(
            code="encoder-profiling", severity="info",
            message=f"{engine} also profiles the vision encoder with a maximum-size image batch "
            "at start-up; for large images or many images per prompt that peak can exceed the "
            "text forward pass estimated here (vLLM: --limit-mm-per-prompt '{\"image\": 0}' "
            "serves text only)"))
    if m.unmodelled_quantization and m.weights_from == "config":
        problems.append(Problem(
            code="unmodelled-quantization", severity="warning",
            message=f"{m.unmodelled_quantization} cannot be sized from config.json: weights are "
            f"counted in {m.dtype}; plan the checkpoint itself (a local directory or its Hub repo) "
            "so the safetensors headers give the exact bytes"))
    problems += [Problem(code="unsupported-layout", severity="warning",
                         message=f"{feature}: the numbers assume full attention on every layer "
                         "and may be wrong for this model") for feature in m.unsupported]
    if g.cuda_total_estimated and dep.sources.get("gpu_total_bytes") != "cli":
        problems.append(Problem(code="gpu-total-estimated", severity="warning",
                                message=f"the CUDA-visible total of {g.id} is an estimate "
                                f"({dep.gpu_total_bytes / GiB:.2f} GiB); pass --gpu-memory-gib with "
                                "the total your engine log prints"))
    if g.vendor != "NVIDIA":
        problems.append(Problem(code="non-cuda-platform", severity="warning",
                                message=f"{g.vendor} GPUs use {engine}'s ROCm/HPU platforms, whose "
                                "defaults and buffers kvplan has not calibrated"))
    return problems


def _quant_name(m: ModelSpec) -> str | None:
    """'awq' from "weight quantization 'awq'" — the method vLLM will detect from the config."""
    text = m.unmodelled_quantization or ""
    return text.split("'")[1] if text.count("'") >= 2 else None


def _serve_ref(m: ModelSpec) -> str:
    """What `vllm serve` needs: the repo id, or the local directory."""
    if not m.source.startswith("local file "):
        return m.id
    src = m.source.removeprefix("local file ")
    return src.removesuffix("/config.json").removesuffix("config.json") or m.id
