"""Plans for SGLang and TGI: the same Plan object, with each engine's own knobs and launch line.

Generic plan fields map to engine flags through Plan.engine.knobs:
max_model_len → --context-length (SGLang) / --max-total-tokens (TGI);
max_num_seqs → --max-running-requests / --max-concurrent-requests;
gpu_memory_utilization → --mem-fraction-static / --cuda-memory-fraction;
max_num_batched_tokens → --chunked-prefill-size / --max-batch-prefill-tokens.
"""

from __future__ import annotations

import math
import shlex
from typing import Any

from .engines import sglang, tgi, vllm
from .errors import InvalidInputError
from .planner import model_gpu_problems
from .specs import (
    GpuSpec,
    KvCache,
    MemoryBreakdown,
    ModelSpec,
    Plan,
    PlanEngine,
    PlanGpu,
    PlanModel,
    Problem,
    QuantSpec,
    Recommendation,
    Recommendations,
    SourcedValue,
    StageBreakdown,
    Workload,
)
from .weights import WeightMemory, parameter_count, weight_memory_per_stage

KNOBS = {
    "sglang": {"tensor_parallel_size": "--tp-size", "pipeline_parallel_size": "--pp-size",
               "data_parallel_size": "--dp-size", "max_model_len": "--context-length",
               "max_num_seqs": "--max-running-requests",
               "max_num_batched_tokens": "--chunked-prefill-size",
               "gpu_memory_utilization": "--mem-fraction-static", "kv_cache_dtype": "--kv-cache-dtype",
               "dtype": "--dtype", "quantization": "--quantization"},
    "tgi": {"tensor_parallel_size": "--num-shard", "max_model_len": "--max-total-tokens",
            "max_num_seqs": "--max-concurrent-requests",
            "max_num_batched_tokens": "--max-batch-prefill-tokens",
            "gpu_memory_utilization": "--cuda-memory-fraction", "kv_cache_dtype": "--kv-cache-dtype",
            "dtype": "--dtype", "quantization": "--quantize"},
}
UNSUPPORTED_KNOBS = {
    "sglang": {"block_size", "enforce_eager", "kv_cache_memory_bytes", "enable_prefix_caching",
               "disable_hybrid_kv_cache_manager", "enable_expert_parallel", "usage_context",
               "max_input_tokens"},
    "tgi": {"pipeline_parallel_size", "data_parallel_size", "block_size", "enforce_eager",
            "kv_cache_memory_bytes", "enable_prefix_caching", "disable_hybrid_kv_cache_manager",
            "enable_expert_parallel", "usage_context"},
}
TGI_MAX_CONCURRENT_REQUESTS = 128  # --max-concurrent-requests default (launcher/src/main.rs; the Args lines of TGI logs)


def _heaviest_stage(m: ModelSpec, tp: int, pp: int, dtype: str, quant: QuantSpec | None) -> WeightMemory:
    """The PP stage whose weights hold the most device memory. SGLang and TGI see weights as
    the drop in free memory, i.e. the caching allocator's reserved segments."""
    return max(weight_memory_per_stage(m, tp=tp, pp=pp, dtype=dtype, quant=quant),
               key=lambda w: w.reserved_bytes)


def _check_knobs(engine: str, opts: dict[str, Any]) -> None:
    bad = sorted(k for k in opts if k in UNSUPPORTED_KNOBS[engine] and opts[k] not in (None, False))
    if bad:
        names = ", ".join("--" + k.replace("_", "-") for k in bad)
        raise InvalidInputError(f"{names} {'is' if len(bad) == 1 else 'are'} not a setting "
                                f"{engine} has", hint="drop it, or plan with the engine it belongs to")


def _layout_problems(engine: str, m: ModelSpec) -> list[Problem]:
    if m.linear_attention is not None:
        return [Problem(code="unsupported-layout", severity="warning",
                        message=f"{engine}'s Mamba/linear-attention state pool is not modelled: the "
                        "KV numbers count the attention layers only")]
    if engine == "tgi" and (m.mla is not None or m.layer_types):
        return [Problem(code="engine-layout", severity="info",
                        message="TGI allocates every layer's K and V for every token (no MLA "
                        "latent cache, no sliding-window savings) — as modelled here")]
    return []


def plan_other(engine: str, m: ModelSpec, g: GpuSpec, *, engine_version: str | None,
               workload: Workload, opts: dict[str, Any]) -> Plan:
    """Plan one SGLang or TGI deployment (engines/sglang.py, engines/tgi.py)."""
    _check_knobs(engine, opts)
    newest = sglang.NEWEST_MODELLED if engine == "sglang" else tgi.NEWEST_MODELLED
    version = engine_version or newest
    problems: list[Problem] = []
    v = vllm.parse_version(version)
    if engine == "sglang" and v > vllm.parse_version(newest):
        problems.append(Problem(code="engine-version-newer", severity="warning",
                                message=f"sglang {version} is newer than {newest}, the newest read"))
    elif engine == "tgi" and v < tgi.ERAS[0].first:
        problems.append(Problem(
            code="engine-version-not-modelled", severity="warning",
            message=f"tgi {version}: releases before 0.9.4 do not size the KV cache at warm-up "
            "(max_batch_total_tokens defaults to 16000); modelled with the 0.9.4 accounting"))
    elif engine == "tgi" and v > vllm.parse_version(newest):
        problems.append(Problem(code="engine-version-newer", severity="warning",
                                message=f"tgi {version} is newer than {newest}, the newest read; "
                                f"modelled with the {tgi.ERAS[-1].name} accounting"))
    # Shared resolution (TP validity, dtypes, device total) through vLLM's resolver, then the
    # engine's own defaults replace vLLM's.
    base = {k: v for k, v in opts.items() if k not in ("max_model_len", "max_num_seqs",
                                                       "max_num_batched_tokens",
                                                       "gpu_memory_utilization", "quantization")}
    era = vllm.ERAS[-1]
    dep, quant = vllm.resolve_deployment(m, g, base, era, version, "cli" if engine_version else "kvplan-default")
    problems += _layout_problems(engine, m) + model_gpu_problems(m, g, dep, engine=engine)
    if opts.get("quantization") and (quant is None or vllm.QUANT_FLAG_METHODS.get(
            str(opts["quantization"]).lower()) != quant.method):
        if str(opts["quantization"]).lower() != "fp8":
            raise InvalidInputError(f"--quantization {opts['quantization']!r} does not match the model")
        quant = quant or QuantSpec(method="fp8", source="cli")
    build = _sglang if engine == "sglang" else _tgi
    return build(m, g, dep, quant, opts, version, workload, problems)


def _sources(dep: Any, opts: dict[str, Any], defaults: dict[str, tuple[Any, str]]) -> dict[str, SourcedValue]:
    out = {k: SourcedValue(value=getattr(dep, k), source=dep.sources.get(k, "engine-default"))
           for k in ("engine_version", "tensor_parallel_size", "pipeline_parallel_size",
                     "data_parallel_size", "dtype", "kv_cache_dtype", "gpu_total_bytes")}
    for key, (value, source) in defaults.items():
        out[key] = SourcedValue(value=opts.get(key, value), source="cli" if key in opts else source)
    return out


def _smallest_tp(m: ModelSpec, g: GpuSpec, tp: int, fits_at: Any) -> Recommendation:
    if fits_at(tp):
        return Recommendation(value=tp, reason=f"fits at tensor_parallel_size {tp}")
    for cand in vllm.valid_tp_sizes(m):
        if cand > tp and fits_at(cand):
            return Recommendation(value=cand, reason=f"smallest valid tensor_parallel_size that fits "
                                  f"({cand} GPUs per replica)")
    return Recommendation(value=None, reason="no valid tensor_parallel_size up to 64 fits")


# ------------------------------------------------------------------------ SGLang


def _sglang(m: ModelSpec, g: GpuSpec, dep: Any, quant: Any, opts: dict[str, Any], version: str,
            workload: Workload, problems: list[Problem]) -> Plan:
    tp, pp = dep.tensor_parallel_size, dep.pipeline_parallel_size
    total = dep.gpu_total_bytes
    mem = sglang.gpu_mem_mib(g, total) if dep.sources.get("gpu_total_bytes") != "cli" else total // 2**20
    v = vllm.parse_version(version)
    d = sglang.defaults(v, m, mem, tp, pp, opts.get("max_num_batched_tokens"))
    chunked, decode_bs, f_default = d.chunked_prefill, d.decode_graph_bs, d.mem_fraction
    if sglang.TIER_FROM <= v < sglang.LEGACY_BEFORE:
        problems.append(Problem(
            code="engine-version-boundary-uncertain", severity="info",
            message=f"sglang {version}: the GPU-tier mem-fraction rule read at 0.5.0rc0 is applied "
            "from 0.4.10 to 0.5.2; its exact first release was not pinned"))
    f = opts.get("gpu_memory_utilization") or f_default
    if not 0 < f <= 1:
        raise InvalidInputError(f"--mem-fraction-static must be in (0, 1], got {f}")
    model_ctx = sglang.context_length(m)
    ctx = opts.get("max_model_len") or model_ctx
    if ctx > model_ctx:
        raise InvalidInputError(f"--context-length {ctx} exceeds the model's {model_ctx} tokens",
                                hint="SGLang refuses it unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")
    wm = _heaviest_stage(m, tp, pp, dep.dtype, quant)
    weights = wm.reserved_bytes
    layers = math.ceil(m.num_layers / pp)
    runtime_dep = dep.model_copy(update={"max_num_batched_tokens": chunked,
                                         "max_num_seqs": min(decode_bs * 2, 4096)})
    activation = vllm.activation_bytes(m, runtime_dep, last_stage=True)
    graphs = vllm.cudagraph_bytes(runtime_dep.model_copy(update={"max_num_seqs": decode_bs}), layers)

    def run(f_: float, tp_: int = tp) -> sglang.SglangResult:
        w = weights if tp_ == tp else _heaviest_stage(m, tp_, pp, dep.dtype, quant).reserved_bytes
        return sglang.plan_memory(m, total_bytes=total, tp=tp_, weights_bytes=w,
                                  kv_dtype=dep.kv_cache_dtype, mem_fraction=f_, ctx=ctx,
                                  chunked=chunked, runtime_bytes=activation + graphs,
                                  swa_pool=d.swa_pool, gpu=g)

    res = run(f)
    problems += res.problems
    seqs = opts.get("max_num_seqs") or res.max_running_requests
    kv_bytes = res.rest_bytes  # negative: the shortfall, as vLLM plans report it

    # Recommendations in SGLang's knobs.
    n = workload.target_concurrency
    work_len = (workload.avg_input_tokens or 0) + (workload.avg_output_tokens or 0)
    need_tokens = max((n or 1) * (work_len or ctx), ctx)
    f_needed = math.ceil((need_tokens * res.cell_bytes + weights) / res.free_before_bytes * 1000) / 1000
    f_ceiling = math.floor((res.free_before_bytes - activation - graphs) / res.free_before_bytes * 1000) / 1000
    if res.fits and not n:
        rec_f = Recommendation(value=f, reason=f"one {ctx}-token request needs {f_needed}; "
                               f"{f_ceiling} is the highest that leaves room for activations and graphs")
    elif f_needed <= f_ceiling:
        rec_f = Recommendation(value=f_needed, reason=f"smallest value whose pool holds {need_tokens:,} "
                               f"tokens ({n or 1} × {work_len or ctx}); up to {f_ceiling} is safe")
    else:
        rec_f = Recommendation(value=f_ceiling, reason=f"{need_tokens:,} tokens need {f_needed}, above "
                               f"the {f_ceiling} that leaves room for activations and CUDA graphs")
    at_rec = run(rec_f.value or f)
    fit_len = min(model_ctx, at_rec.tokens)
    rec_len = (Recommendation(value=ctx, reason=f"one {ctx}-token request fits; the pool holds "
                              f"{res.tokens / ctx:.2f} of them") if res.fits else
               Recommendation(value=fit_len or None, reason="largest context the KV pool holds at the "
                              "recommended fraction" if fit_len else "no context fits"))
    basis = work_len or int(rec_len.value or ctx)
    rec_seqs = Recommendation(value=max(1, at_rec.tokens // basis) if at_rec.tokens else None,
                              reason=f"the pool holds {at_rec.tokens // basis if basis else 0} requests "
                              f"of {basis} tokens (SGLang's own default: {res.max_running_requests})")
    rec_tp = _smallest_tp(m, g, tp, lambda t: run(f_default if "gpu_memory_utilization" not in opts else f, t).fits)

    args = ["python", "-m", "sglang.launch_server", "--model-path", _ref(m)]
    if tp != 1:
        args += ["--tp-size", str(tp)]
    if dep.data_parallel_size != 1:
        args += ["--dp-size", str(dep.data_parallel_size)]
    if pp != 1:
        args += ["--pp-size", str(pp)]
    if rec_len.value:
        args += ["--context-length", str(rec_len.value)]
    if rec_f.value:
        args += ["--mem-fraction-static", f"{rec_f.value:g}"]
    if work_len or n:
        args += ["--max-running-requests", str(rec_seqs.value)]
    if dep.kv_cache_dtype.startswith("fp8"):
        args += ["--kv-cache-dtype", "fp8_e4m3" if dep.kv_cache_dtype in ("fp8", "fp8_e4m3") else dep.kv_cache_dtype]
    if m.revision:
        args += ["--revision", m.revision]

    defaults = {"max_model_len": (ctx, "model-config"), "max_num_seqs": (seqs, "engine-default"),
                "max_num_batched_tokens": (chunked, "engine-default"),
                "gpu_memory_utilization": (f, "engine-default")}
    stage = StageBreakdown(layers=m.num_layers // pp, weights_bytes=weights,
                           weights_tensor_bytes=wm.tensor_bytes, activation_bytes=activation,
                           non_torch_bytes=sglang.context_bytes(tp, g), cudagraph_bytes=graphs,
                           kv_cache_bytes=kv_bytes, num_blocks=res.tokens)
    return Plan(
        fits=res.fits, problems=problems,
        model=PlanModel(id=m.id, source=m.source, parameters=parameter_count(m),
                        weights_from=m.weights_from, dtype=dep.dtype,
                        quantization=quant.method if quant else None),
        gpu=PlanGpu(id=g.id, name=g.name, count=tp * pp * dep.data_parallel_size,
                    total_bytes_estimated=g.cuda_total_estimated and dep.sources.get("gpu_total_bytes") != "cli"),
        engine=PlanEngine(name="sglang", version=version,
                          era=d.era,
                          knobs=KNOBS["sglang"]),
        inputs=_sources(dep, opts, defaults), workload=workload,
        memory=MemoryBreakdown(
            total_bytes=total, budget_bytes=math.floor(f * res.free_before_bytes), weights_bytes=weights,
            weights_tensor_bytes=wm.tensor_bytes, activation_bytes=activation,
            non_torch_bytes=sglang.context_bytes(tp, g), cudagraph_bytes=graphs,
            cudagraph_in_budget=False, kv_cache_bytes=kv_bytes,
            estimated=["activation_bytes", "non_torch_bytes", "cudagraph_bytes"], stages=[stage]),
        kv_cache=KvCache(bytes_per_token=res.cell_bytes, bytes_per_block=res.cell_bytes,
                         bytes_per_request=res.cell_bytes * ctx, block_size=1, num_blocks=res.tokens,
                         tokens=res.tokens, max_concurrency=round(res.tokens / ctx, 2),
                         max_model_len_fit=min(model_ctx, res.tokens)),
        recommendations=Recommendations(max_model_len=rec_len, max_num_seqs=rec_seqs,
                                        gpu_memory_utilization=rec_f, tensor_parallel_size=rec_tp),
        command=shlex.join(args),
    )


# --------------------------------------------------------------------------- TGI


def _tgi(m: ModelSpec, g: GpuSpec, dep: Any, quant: Any, opts: dict[str, Any], version: str,
         workload: Workload, problems: list[Problem]) -> Plan:
    tp = dep.tensor_parallel_size
    total = dep.gpu_total_bytes
    v = vllm.parse_version(version)
    era = tgi.select_era(v)
    f = opts.get("gpu_memory_utilization") or 1.0
    if not 0 < f <= 1:
        raise InvalidInputError(f"--cuda-memory-fraction must be in (0, 1], got {f}")
    launch = tgi.Launcher(g.smi_names[0] if g.smi_names else None, g.smi_total_mib, tp, f)
    lengths = tgi.default_lengths(m, era, v, launch, opts.get("max_input_tokens"))
    prefill = opts.get("max_num_batched_tokens") or lengths.prefill_tokens
    if not opts.get("max_num_batched_tokens"):
        problems.append(Problem(
            code="tgi-default-prefill", severity="warning" if lengths.assumed else "info",
            message=f"TGI's launcher sets --max-batch-prefill-tokens to {prefill:,} ({lengths.how}); "
            "the warm-up prefills that many tokens, so its activation peak is sized from it"
            + ("; pass --max-num-batched-tokens with the value the launcher logs" if lengths.assumed else "")))
    model_max = m.max_position_embeddings or prefill
    max_total = opts.get("max_model_len")
    if max_total and max_total > model_max:
        raise InvalidInputError(f"--max-total-tokens {max_total} exceeds the model's {model_max}")
    max_input = lengths.max_input_tokens or (max_total - 1 if max_total else None)
    max_total = max_total or lengths.max_total_tokens
    if max_input and max_total and max_input >= max_total:
        raise InvalidInputError(f"--max-input-tokens {max_input} must be below --max-total-tokens "
                                f"{max_total} (TGI's launcher refuses to start)",
                                hint="lower --max-input-tokens or raise --max-total-tokens")
    if max_input and prefill < max_input and era.defaults != "3.x":
        raise InvalidInputError(f"--max-batch-prefill-tokens {prefill} must be at least "
                                f"--max-input-tokens {max_input} (TGI's launcher refuses to start)",
                                hint="raise --max-batch-prefill-tokens")
    wm = _heaviest_stage(m, tp, 1, dep.dtype, quant)
    weights = wm.reserved_bytes
    cc = _capability(g)
    block = tgi.block_size(m, era, cc)
    warm_dep = dep.model_copy(update={"max_num_batched_tokens": prefill, "max_num_seqs": 1,
                                      "engine_version": "0.6.6"})  # eager PyTorch: V0 constant

    def warmup_peak(tp_: int) -> int:
        d = warm_dep if tp_ == tp else warm_dep.model_copy(update={"tensor_parallel_size": tp_})
        return (vllm.activation_bytes(m, d, last_stage=True)
                + tgi.prefill_logits_bytes(m, era, tp_, prefill, dep.dtype)
                + tgi.warmup_extra_bytes(m, v, tp_, prefill, dep.dtype, cc,
                                         lengths.max_input_tokens))

    warmup = warmup_peak(tp)

    def run(f_: float, tp_: int = tp) -> tgi.TgiResult:
        w = weights if tp_ == tp else _heaviest_stage(m, tp_, 1, dep.dtype, quant).reserved_bytes
        return tgi.plan_memory(m, era, total_bytes=total, tp=tp_, weights_bytes=w,
                               warmup_peak_bytes=warmup if tp_ == tp else warmup_peak(tp_),
                               kv_dtype=dep.kv_cache_dtype, fraction=f_, prefill_tokens=prefill,
                               max_input_tokens=max_input, max_total_tokens=max_total, block=block,
                               gpu=g)

    res = run(f)
    problems += res.problems
    problems.append(Problem(
        code="tgi-upper-bound", severity="warning",
        message="TGI capacity is an upper bound: the replayed TGI logs held more memory at "
        "warm-up than kvplan models and got fewer KV tokens (README accuracy table)"))
    length = res.max_total_tokens
    n = workload.target_concurrency
    work_len = (workload.avg_input_tokens or 0) + (workload.avg_output_tokens or 0)
    need_tokens = max((n or 1) * (work_len or length), length)
    f_needed = _tgi_fraction_needed(lambda f_: run(f_).tokens, need_tokens)
    rec_f = (Recommendation(value=f, reason=f"{need_tokens:,} tokens need {f_needed}; TGI keeps "
                            f"{1 - era.wiggle_room:.0%} wiggle room on top ({era.name})")
             if f_needed is not None and f_needed <= f else
             Recommendation(value=1.0 if f_needed is None else min(1.0, f_needed),
                            reason=f"{need_tokens:,} tokens need " + (
                                "more than the whole GPU" if f_needed is None else str(f_needed))))
    rec_len = (Recommendation(value=length, reason=f"the KV cache holds {res.tokens:,} tokens, "
                              f"{res.tokens / length:.2f} requests of {length}") if res.fits else
               Recommendation(value=min(res.tokens, model_max) or None,
                              reason="largest --max-total-tokens the KV cache holds"))
    basis = work_len or int(rec_len.value or length)
    fit = res.tokens // basis if basis else 0
    rec_seqs = Recommendation(value=max(1, min(fit, TGI_MAX_CONCURRENT_REQUESTS)) if fit else None,
                              reason=f"the KV cache holds {fit} requests of {basis} tokens "
                              f"(TGI's --max-concurrent-requests default: {TGI_MAX_CONCURRENT_REQUESTS})")
    rec_tp = _smallest_tp(m, g, tp, lambda t: run(f, t).fits)

    args = ["text-generation-launcher", "--model-id", _ref(m)]
    if tp != 1:
        args += ["--num-shard", str(tp)]
    if rec_len.value:
        asked = opts.get("max_input_tokens")  # kept when the recommended total still exceeds it
        inp = asked if asked and asked < int(rec_len.value) else int(rec_len.value) - 1
        args += ["--max-input-tokens", str(inp), "--max-total-tokens", str(rec_len.value)]
    if "max_num_batched_tokens" in opts:
        args += ["--max-batch-prefill-tokens", str(prefill)]
    if rec_f.value and rec_f.value != 1.0:
        args += ["--cuda-memory-fraction", f"{rec_f.value:g}"]
    if work_len or n:
        args += ["--max-concurrent-requests", str(rec_seqs.value)]
    if dep.kv_cache_dtype.startswith("fp8"):
        args += ["--kv-cache-dtype", "fp8_e5m2" if dep.kv_cache_dtype == "fp8_e5m2" else "fp8_e4m3fn"]
    if m.revision:
        args += ["--revision", m.revision]

    defaults = {"max_model_len": (length, "engine-default"),
                "max_num_seqs": (TGI_MAX_CONCURRENT_REQUESTS, "engine-default"),
                "max_num_batched_tokens": (prefill, "engine-default"),
                "gpu_memory_utilization": (f, "engine-default")}
    context = tgi.context_bytes(tp, block, g)
    stage = StageBreakdown(layers=m.num_layers, weights_bytes=weights, weights_tensor_bytes=wm.tensor_bytes,
                           activation_bytes=warmup, non_torch_bytes=context, cudagraph_bytes=0,
                           kv_cache_bytes=res.kv_bytes, num_blocks=res.tokens // res.block_size)
    return Plan(
        fits=res.fits, problems=problems,
        model=PlanModel(id=m.id, source=m.source, parameters=parameter_count(m),
                        weights_from=m.weights_from, dtype=dep.dtype,
                        quantization=quant.method if quant else None),
        gpu=PlanGpu(id=g.id, name=g.name, count=tp,
                    total_bytes_estimated=g.cuda_total_estimated and dep.sources.get("gpu_total_bytes") != "cli"),
        engine=PlanEngine(name="tgi", version=version, era=f"{era.name} accounting",
                          knobs=KNOBS["tgi"]),
        inputs=_sources(dep, opts, defaults), workload=workload,
        memory=MemoryBreakdown(
            total_bytes=total, budget_bytes=res.budget_bytes, weights_bytes=weights,
            weights_tensor_bytes=wm.tensor_bytes, activation_bytes=warmup, non_torch_bytes=context,
            cudagraph_bytes=0, cudagraph_in_budget=False,
            kv_cache_bytes=res.kv_bytes,
            estimated=["activation_bytes", "non_torch_bytes"], stages=[stage]),
        kv_cache=KvCache(bytes_per_token=res.bytes_per_token, bytes_per_block=res.bytes_per_token * res.block_size,
                         bytes_per_request=res.bytes_per_token * length, block_size=res.block_size,
                         num_blocks=res.tokens // res.block_size, tokens=res.tokens,
                         max_concurrency=round(res.tokens / length, 2) if length else 0.0,
                         max_model_len_fit=min(res.tokens, model_max)),
        recommendations=Recommendations(max_model_len=rec_len, max_num_seqs=rec_seqs,
                                        gpu_memory_utilization=rec_f, tensor_parallel_size=rec_tp),
        command=shlex.join(args),
    )


def _capability(g: GpuSpec) -> float | None:
    try:
        return float(g.compute_capability) if g.compute_capability else None
    except ValueError:  # AMD gfx names
        return None


def _tgi_fraction_needed(tokens_at: Any, need_tokens: int) -> float | None:
    """Smallest --cuda-memory-fraction (two decimals) whose KV cache holds need_tokens, by
    bisection over the era's formula; None when even 1.0 is not enough."""
    if tokens_at(1.0) < need_tokens:
        return None
    lo, hi = 0, 100  # hundredths
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if tokens_at(mid / 100) >= need_tokens:
            hi = mid
        else:
            lo = mid
    return hi / 100


def _ref(m: ModelSpec) -> str:
    from .planner import _serve_ref

    return _serve_ref(m)
