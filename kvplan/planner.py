"""From model + GPU + knobs + workload + engine to one Plan: fit, capacity, recommendations,
launch line. Pure: no catalogue, files or network (api.py resolves names). Written once for
every engine, over the `Engine` interface (engines/base.py).
"""

from __future__ import annotations

from . import perf, performance
from .engines import registry
from .engines.base import Engine, MemoryResult
from .errors import InvalidInputError
from .features import prefix_concurrency
from .knobs import KNOB_NAMES, Knobs, flag, resolve_layout, valid_tp_sizes
from .specs import (
    Deployment,
    GpuSpec,
    KvCache,
    MemoryBreakdown,
    ModelSpec,
    Performance,
    Plan,
    PlanEngine,
    PlanGpu,
    PlanModel,
    Price,
    Problem,
    Recommendation,
    Recommendations,
    SourcedValue,
    StageBreakdown,
    Workload,
)
from .units import GiB
from .versions import parse_version
from .weights import parameter_count

__all__ = ["KNOB_NAMES", "plan", "evaluate", "model_gpu_problems", "serve_ref"]

# Plan.inputs, in display order: (input name, the knob that sets it)
INPUTS = (
    ("engine_version", None), ("tensor_parallel_size", None), ("pipeline_parallel_size", None),
    ("data_parallel_size", None), ("dtype", "dtype"), ("kv_cache_dtype", "kv_cache_dtype"),
    ("quantization", "quantization"), ("max_model_len", "max_model_len"),
    ("max_input_tokens", "max_input_tokens"), ("max_total_tokens", "max_total_tokens"),
    ("max_num_seqs", "max_num_seqs"), ("max_num_batched_tokens", "max_num_batched_tokens"),
    ("gpu_memory_utilization", "gpu_memory_utilization"), ("block_size", "block_size"),
    ("enforce_eager", "enforce_eager"), ("enable_prefix_caching", "enable_prefix_caching"),
    ("hybrid_kv_cache_manager", "disable_hybrid_kv_cache_manager"),
    ("enable_expert_parallel", "enable_expert_parallel"),
    ("kv_cache_memory_bytes", "kv_cache_memory_bytes"), ("gpu_total_bytes", None),
)


def evaluate(eng: Engine, m: ModelSpec, gpu: GpuSpec, knobs: Knobs, version: str,
             version_source: str = "cli") -> tuple[Deployment, MemoryResult]:
    """Resolve every knob for `eng` and run its memory accounting."""
    layout = resolve_layout(m, gpu, knobs, engine_label=eng.label)
    dep = eng.resolve(m, gpu, layout, knobs, version)
    dep.sources["engine_version"] = version_source  # type: ignore[index]
    return dep, eng.memory(m, gpu, dep)


def plan(m: ModelSpec, gpu: GpuSpec, knobs: Knobs | None = None, *, engine: str = "vllm",
         engine_version: str | None = None, workload: Workload | None = None,
         price: Price | None = None) -> Plan:
    """Plan one deployment. Raises KvplanError subclasses for bad input; a deployment that
    does not fit is a Plan with fits=False, not an exception."""
    eng = registry.get(engine)
    knobs = knobs or Knobs()
    workload = workload or Workload()
    _check_supported(eng, knobs)
    version = engine_version or eng.newest_version
    parse_version(version)
    _, problems = eng.era(version)
    dep, res = evaluate(eng, m, gpu, knobs, version, "cli" if engine_version else "kvplan-default")
    problems += eng.layout_problems(m) + res.problems + model_gpu_problems(m, gpu, dep, engine=eng.label)
    with_prefix, prefix_problems = prefix_concurrency(m, dep, res, workload.shared_prefix_tokens)
    problems += prefix_problems
    rec, planned, planned_res = _recommend(eng, m, gpu, knobs, dep, res, workload)
    performance, perf_problems = _performance(eng, m, gpu, knobs, planned, planned_res, rec,
                                              workload, price)
    problems += perf_problems
    worst = res.worst
    estimated = list(res.estimated)
    if gpu.cuda_total_estimated and dep.sources.get("gpu_total_bytes") != "cli":
        estimated.append("total_bytes")
    return Plan(
        fits=res.fits,
        problems=problems,
        model=PlanModel(id=m.id, source=m.source, parameters=parameter_count(m),
                        weights_from=m.weights_from, dtype=dep.dtype,
                        quantization=dep.quantization or m.unmodelled_quantization_method),
        gpu=PlanGpu(id=gpu.id, name=gpu.name,
                    count=dep.tensor_parallel_size * dep.pipeline_parallel_size * dep.data_parallel_size,
                    total_bytes_estimated="total_bytes" in estimated),
        engine=PlanEngine(name=eng.name, label=eng.label, version=version, era=res.era or dep.era,
                          knobs=dict(eng.flags)),
        inputs=_inputs(eng, dep, res),
        workload=workload,
        memory=MemoryBreakdown(
            total_bytes=dep.gpu_total_bytes, budget_bytes=res.budget_bytes,
            weights_bytes=worst.weights_bytes, weights_tensor_bytes=worst.weights_tensor_bytes,
            activation_bytes=worst.activation_bytes, non_torch_bytes=worst.non_torch_bytes,
            cudagraph_bytes=worst.cudagraph_bytes, cudagraph_in_budget=res.cudagraph_in_budget,
            kv_cache_bytes=worst.kv_cache_bytes, estimated=estimated,
            draft_weights_bytes=res.speculative.draft_weights_bytes if res.speculative else 0,
            lora_bytes=res.lora.gpu_bytes if res.lora else 0,
            notes={k: v for k, v in vars(res.notes).items() if v is not None},
            stages=[StageBreakdown(layers=st.layers, weights_bytes=st.weights_bytes,
                                   weights_tensor_bytes=st.weights_tensor_bytes,
                                   activation_bytes=st.activation_bytes,
                                   non_torch_bytes=st.non_torch_bytes,
                                   cudagraph_bytes=st.cudagraph_bytes,
                                   kv_cache_bytes=st.kv_cache_bytes, num_blocks=st.num_blocks)
                    for st in res.stages]),
        kv_cache=KvCache(
            bytes_per_token=res.bytes_per_token, bytes_per_block=worst.bytes_per_block,
            bytes_per_request=res.request_blocks(res.max_model_len) * worst.bytes_per_block
            if res.max_model_len else 0,
            block_size=res.block_size, num_blocks=res.num_blocks, tokens=res.tokens,
            max_concurrency=round(res.max_concurrency, 2), max_model_len_fit=res.max_model_len_fit,
            effective_max_concurrency_with_prefix=with_prefix),
        recommendations=rec,
        performance=performance,
        command=eng.command(serve_ref(m), planned, rec, workload, m.revision),
        speculative=res.speculative, lora=res.lora, offload=res.offload,
    )


def _check_supported(eng: Engine, knobs: Knobs) -> None:
    """A knob the engine does not have is an error naming the engines that do."""
    bad = sorted(k for k, v in knobs.given().items() if k in eng.unsupported and v is not False)
    if not bad:
        return
    names = ", ".join(flag(k) for k in bad)
    have = [e.name for e in registry.ENGINES.values() if not set(bad) & e.unsupported]
    raise InvalidInputError(
        f"{names} {'is' if len(bad) == 1 else 'are'} not a setting {eng.label} has",
        hint="drop it" + (f", or plan with --engine {' / '.join(have)}" if have else ""))


def _inputs(eng: Engine, dep: Deployment, res: MemoryResult) -> dict[str, SourcedValue]:
    out = {}
    for key, knob in INPUTS:
        if knob is not None and knob in eng.unsupported:
            continue
        value = getattr(dep, key)
        source = dep.sources.get(key, "engine-default")
        if key in res.engine_defaults and source != "cli":
            value = res.engine_defaults[key]
        if value is None and key in ("max_input_tokens", "max_total_tokens"):
            continue
        out[key] = SourcedValue(value=value, source=source)
    return out


# ---------------------------------------------------------------- recommendations


def _try(eng: Engine, m: ModelSpec, gpu: GpuSpec, knobs: Knobs, version: str,
         **changes: object) -> tuple[Deployment, MemoryResult] | None:
    """The deployment with some knobs changed; None when the engine refuses that setting."""
    try:
        return evaluate(eng, m, gpu, knobs.model_copy(update=changes), version)
    except InvalidInputError:
        return None


def _smallest_tp(eng: Engine, m: ModelSpec, gpu: GpuSpec, knobs: Knobs, dep: Deployment,
                 res: MemoryResult) -> Recommendation:
    tp = dep.tensor_parallel_size
    if res.fits:
        return Recommendation(value=tp, reason=f"fits at tensor_parallel_size {tp}")
    for cand in valid_tp_sizes(m):
        if cand <= tp:
            continue
        got = _try(eng, m, gpu, knobs, dep.engine_version, tensor_parallel_size=cand)
        if got and got[1].fits:
            return Recommendation(value=cand, reason=f"smallest valid tensor_parallel_size that "
                                  f"fits ({cand} GPUs per replica)")
    return Recommendation(value=None, reason="no valid tensor_parallel_size up to 64 fits")


def _largest_len(fits: object, cap: int) -> int:
    """Binary search over 1…cap for the largest length that `fits` (0 if none)."""
    lo, hi = 0, cap
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):  # type: ignore[operator]
            lo = mid
        else:
            hi = mid - 1
    return lo


def _recommend(eng: Engine, m: ModelSpec, gpu: GpuSpec, knobs: Knobs, dep: Deployment,
               res: MemoryResult, workload: Workload
               ) -> tuple[Recommendations, Deployment, MemoryResult]:
    """The four recommendations, and the deployment they were planned on (the serve line's)."""
    rec_tp = _smallest_tp(eng, m, gpu, knobs, dep, res)
    prefix = ""
    if rec_tp.value and rec_tp.value != dep.tensor_parallel_size and res.max_model_len_fit == 0:
        # Nothing fits at this TP (no KV memory at all): the other settings only make sense on
        # the deployment that does, so re-plan there. Otherwise a shorter length and a larger
        # TP are alternatives, and the command keeps the user's TP.
        knobs = knobs.model_copy(update={"tensor_parallel_size": rec_tp.value})
        dep, res = evaluate(eng, m, gpu, knobs, dep.engine_version)
        prefix = f"at tensor_parallel_size {rec_tp.value}: "

    usable = res.usable_blocks
    n = workload.target_concurrency
    length_now = res.max_model_len
    model_max = max(res.max_model_len_fit, length_now)  # N requests fit no longer than one
    work_len = (workload.avg_input_tokens or 0) + (workload.avg_output_tokens or 0)

    # max_model_len: a length the user gave is kept (the fraction below is sized for it);
    # with a target but no workload length, the largest length at which N requests fit;
    # otherwise the configured length when one request fits, else the largest that does
    # (vLLM's "estimated maximum model length").
    given_len = dep.sources.get("max_model_len") == "cli"
    if n and not work_len and not given_len:
        length = _largest_len(lambda k: n * res.request_blocks(k) <= usable, model_max)
        rec_len = (Recommendation(value=None, reason=f"the KV cache ({usable} blocks) cannot hold "
                                  f"{n} requests of even one block each") if length <= 0 else
                   Recommendation(value=length, reason=f"largest length at which {n} concurrent "
                                  f"requests fit: {n} × {res.request_blocks(length)} blocks ≤ "
                                  f"{usable} usable blocks"))
    elif n and not work_len and res.fits:
        rec_len = Recommendation(value=length_now, reason=f"as given; {n} requests of "
                                 f"{length_now} tokens need {n * res.request_blocks(length_now)} "
                                 f"blocks of the {usable} usable at the current budget")
    elif res.fits:
        rec_len = Recommendation(value=length_now, reason=f"one {length_now}-token request fits; "
                                 f"the KV cache holds {res.max_concurrency:.2f} of them")
    elif res.max_model_len_fit > 0:
        rec_len = Recommendation(value=res.max_model_len_fit, reason="the configured length does "
                                 "not fit; this is the largest that does (the engine's estimated "
                                 "maximum model length)")
    else:
        rec_len = Recommendation(value=None, reason="no length fits: there is no memory for the "
                                 "KV cache")

    # gpu_memory_utilization (the engine's budget fraction)
    ceiling = eng.fraction_ceiling(dep, res)
    max_len = int(rec_len.value or length_now)
    target_len = work_len or max_len
    one = res.request_blocks(max_len)
    if n:
        blocks_needed = max(n * res.request_blocks(target_len), one) + res.reserved_blocks
        target = f"{n} requests of {target_len} tokens"
    else:
        blocks_needed = one + res.reserved_blocks
        target = f"one {max_len}-token request"
    needed = eng.fraction_needed(m, gpu, dep, res, blocks_needed)
    current = dep.gpu_memory_utilization
    if dep.kv_cache_memory_bytes is not None:
        rec_util = Recommendation(value=current, reason="--kv-cache-memory-bytes replaces the "
                                  "utilization budget")
    elif needed is not None and needed <= ceiling:
        if n or not res.fits:
            rec_util = Recommendation(value=needed, reason=f"{target} need {needed}: the smallest "
                                      f"value that serves them; up to {ceiling} starts safely and "
                                      "adds KV capacity")
        else:
            rec_util = Recommendation(value=current, reason=f"{target} needs {needed} or more; the "
                                      f"current value leaves the rest to concurrency; {ceiling} is "
                                      "the highest that starts safely")
    else:
        what = "more than the whole GPU" if needed is None else str(needed)
        alternatives = _what_would_serve(eng, m, gpu, knobs, dep, n or 1, target_len, ceiling)
        rec_util = Recommendation(value=ceiling, reason=f"{target} need {what}, above the "
                                  f"{ceiling} at which {eng.label} still starts; {alternatives}")

    # max_num_seqs
    if work_len:
        basis, what = work_len, f"the workload's {work_len} tokens per request (input + output)"
    else:
        basis = max_len
        what = (f"max_model_len {basis} for every request — the no-preemption bound; pass "
                "--avg-input-tokens/--avg-output-tokens for a realistic figure")
    if n and rec_util.value and rec_util.value != current:
        # With a target, size the batch at the recommended fraction the command will use.
        got = _try(eng, m, gpu, knobs, dep.engine_version, gpu_memory_utilization=rec_util.value)
        if got:
            usable = got[1].usable_blocks
    fit_seqs = usable // res.request_blocks(basis) if basis else 0
    cap = eng.max_seqs_cap(gpu, dep)
    capped = cap is not None and fit_seqs > cap
    rec_seqs = Recommendation(
        value=(min(fit_seqs, cap) if capped else fit_seqs) or None,  # type: ignore[type-var]
        reason=f"the KV cache holds {fit_seqs} request{'s' if fit_seqs != 1 else ''} at {what}"
        + (f", capped at the engine's limit of {cap} for this GPU" if capped else ""))

    for r in (rec_len, rec_seqs, rec_util):
        r.reason = prefix + r.reason
    return (Recommendations(max_model_len=rec_len, max_num_seqs=rec_seqs,
                            gpu_memory_utilization=rec_util, tensor_parallel_size=rec_tp), dep, res)


def _what_would_serve(eng: Engine, m: ModelSpec, gpu: GpuSpec, knobs: Knobs, dep: Deployment,
                      n: int, length: int, ceiling: float) -> str:
    """Name the changes that would meet the target at the highest safe fraction."""
    version = dep.engine_version
    base = knobs.model_copy(update={"gpu_memory_utilization": ceiling})
    options = []
    got = _try(eng, m, gpu, base, version)
    if got:
        r = got[1]
        fit_len = _largest_len(lambda k: n * r.request_blocks(k) <= r.usable_blocks,
                               max(r.max_model_len, r.max_model_len_fit))
        if fit_len > 0:
            options.append(f"{eng.flags.get('max_model_len', '--max-model-len')} {fit_len}")
    for cand in valid_tp_sizes(m):
        if cand <= dep.tensor_parallel_size:
            continue
        got = _try(eng, m, gpu, base, version, tensor_parallel_size=cand)
        if got and got[1].usable_blocks >= n * got[1].request_blocks(length):
            options.append(f"{eng.flags.get('tensor_parallel_size', '--tensor-parallel-size')} {cand}")
            break
    if not dep.kv_cache_dtype.startswith("fp8"):
        got = _try(eng, m, gpu, base, version, kv_cache_dtype="fp8")
        if got and got[1].usable_blocks >= n * got[1].request_blocks(length):
            options.append(f"{eng.flags.get('kv_cache_dtype', '--kv-cache-dtype')} fp8")
    return ("it would be met with " + " or ".join(options)) if options else \
        "no single change (shorter length, more GPUs, fp8 KV cache) meets it"


# ------------------------------------------------------------------ performance


def _performance(eng: Engine, m: ModelSpec, gpu: GpuSpec, knobs: Knobs, dep: Deployment,
                 res: MemoryResult, rec: Recommendations, w: Workload,
                 price: Price | None) -> tuple[Performance | None, list[Problem]]:
    """The latency model on the recommended deployment; with SLOs, max_num_seqs and
    max_num_batched_tokens are chosen by it (and rec is updated in place)."""
    missing = perf.missing_gpu_fields(gpu)
    if missing:
        return None, [Problem(code="no-performance-figures", severity="warning",
                              message=f"{gpu.id} has no {', '.join(missing)} in gpu_specs: "
                              "latency and throughput are omitted (the memory plan stands)")]
    util = rec.gpu_memory_utilization.value
    if util and util != dep.gpu_memory_utilization and dep.kv_cache_memory_bytes is None:
        got = _try(eng, m, gpu, knobs, dep.engine_version, gpu_memory_utilization=util)
        if got:  # predict the deployment the launch line starts
            dep, res = got
    n = performance.lengths(w)
    bound = performance.kv_bound(res, n)
    if not res.fits or bound == 0:
        return None, []
    cap = eng.max_seqs_cap(gpu, dep)
    engine_seqs = (dep.max_num_seqs if dep.sources.get("max_num_seqs") == "cli"
                   else res.engine_defaults.get("max_num_seqs") or dep.max_num_seqs)
    if rec.max_num_seqs.value and (w.sizes_batch()
                                   or dep.sources.get("max_num_seqs") == "cli"):
        engine_seqs = int(rec.max_num_seqs.value)  # what the launch line sets
    problems: list[Problem] = []
    has_slo = w.slo_ttft_ms is not None or w.slo_tpot_ms is not None
    tokens = None
    if has_slo:
        search = performance.context(m, gpu, dep, res, max_num_seqs=min(bound, cap or bound))
        rec.max_num_seqs, best = performance.slo_seqs(search, w, n, bound, cap)
        if best == 0:
            one = perf.evaluate(search, concurrency=1, input_tokens=n.input_tokens,
                                output_tokens=n.output_tokens)
            problems.append(performance.unmet_slo_problem(
                w, n, one, _slo_alternatives(eng, m, gpu, knobs, dep, w, n)))
        else:
            engine_seqs = best
            if dep.sources.get("max_num_batched_tokens") != "cli":
                rec.max_num_batched_tokens, tokens = _batched_tokens(eng, m, gpu, knobs, dep, w, n, best)
                got = _try(eng, m, gpu, knobs, dep.engine_version, max_num_batched_tokens=tokens)
                if got and tokens != dep.max_num_batched_tokens:  # re-search at that budget
                    again = performance.context(m, gpu, got[0], got[1],
                                                max_num_seqs=min(bound, cap or bound))
                    seqs_rec, again_best = performance.slo_seqs(again, w, n,
                                                                performance.kv_bound(got[1], n), cap)
                    if again_best >= best:
                        rec.max_num_seqs, best = seqs_rec, again_best
                        engine_seqs = best
            if w.target_concurrency and w.target_concurrency > best:
                problems.append(Problem(
                    code="slo-target-concurrency", severity="error",
                    message=f"{w.target_concurrency} concurrent requests miss the latency target; "
                    f"up to {best} meet it here ({rec.max_num_seqs.reason})"))
    concurrency = w.target_concurrency or min(bound, engine_seqs)
    if tokens and tokens != dep.max_num_batched_tokens:
        got = _try(eng, m, gpu, knobs, dep.engine_version, max_num_batched_tokens=tokens)
        if got:
            dep, res = got
    ctx = performance.context(m, gpu, dep, res, max_num_seqs=engine_seqs)
    return performance.section(ctx, dep, w, n, concurrency, max(bound, concurrency), price), problems


def _batched_tokens(eng: Engine, m: ModelSpec, gpu: GpuSpec, knobs: Knobs, dep: Deployment,
                    w: Workload, n: performance.Lengths, seqs: int) -> tuple[Recommendation, int]:
    """max_num_batched_tokens for the TTFT/TPOT trade-off, each candidate re-planned (its
    activation peak moves the KV cache) and evaluated at `seqs` requests."""
    options = []
    for cand in performance.BATCHED_TOKENS_CHOICES:
        got = _try(eng, m, gpu, knobs, dep.engine_version, max_num_batched_tokens=cand)
        if not got or not got[1].fits or performance.kv_bound(got[1], n) < seqs:
            continue
        ctx = performance.context(m, gpu, got[0], got[1], max_num_seqs=seqs)
        options.append((cand, perf.evaluate(ctx, concurrency=seqs, input_tokens=n.input_tokens,
                                            output_tokens=n.output_tokens)))
    chosen = performance.batched_tokens_choice(options, dep.max_num_batched_tokens, w)
    return chosen, int(chosen.value or dep.max_num_batched_tokens)


def _slo_alternatives(eng: Engine, m: ModelSpec, gpu: GpuSpec, knobs: Knobs, dep: Deployment,
                      w: Workload, n: performance.Lengths) -> list[str]:
    """Single changes that meet the SLOs at one request: more TP, fp8 weights, fp8 KV."""
    out = []
    tries: list[tuple[str, dict[str, object]]] = []
    bigger = [t for t in valid_tp_sizes(m) if t > dep.tensor_parallel_size]
    if bigger:
        tries.append((f"{eng.flags.get('tensor_parallel_size', '--tensor-parallel-size')} "
                      f"{bigger[0]}", {"tensor_parallel_size": bigger[0]}))
    if dep.quant is None and gpu.fp8_native and "quantization" not in eng.unsupported:
        tries.append(("--quantization fp8", {"quantization": "fp8"}))
    for label, change in tries:
        got = _try(eng, m, gpu, knobs, dep.engine_version, **change)
        if not got or not got[1].fits:
            continue
        ctx = performance.context(m, gpu, got[0], got[1], max_num_seqs=1)
        p = perf.evaluate(ctx, concurrency=1, input_tokens=n.input_tokens, output_tokens=n.output_tokens)
        if performance._meets(p, w):
            out.append(label)
    return out


# ------------------------------------------------------------------ shared notes


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
    if g.local is not None and dep.other_processes_bytes:
        problems.append(Problem(
            code="gpu-shared", severity="warning",
            message=f"GPU {g.local.index} ({g.local.nvml_name}) is shared: "
            f"{dep.other_processes_bytes / GiB:.2f} GiB is already in use "
            f"({g.local.processes} compute process(es)); planned against what is free"))
    if g.vendor != "NVIDIA":
        problems.append(Problem(code="non-cuda-platform", severity="warning",
                                message=f"{g.vendor} GPUs use {engine}'s ROCm/HPU platforms, whose "
                                "defaults and buffers kvplan has not calibrated"))
    return problems


def serve_ref(m: ModelSpec) -> str:
    """What a launcher needs: the local directory, else the repo id."""
    return m.local_dir or m.id
