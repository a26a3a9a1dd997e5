"""The library entry points: resolve names (catalogue, local files, the Hub), then call the
pure planner. The only layer between users and the core that does I/O."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .engines import registry
from .errors import InvalidInputError, KvplanError, UnknownGpuError
from .knobs import Knobs
from .planner.curve import CurvePoint, kv_curve
from .planner.plan import plan as _plan
from .planner.plan import plan_and_context as _plan_and_context
from .sources.catalog import gpu_specs, resolve_gpu, resolve_model
from .specs import DisaggPlan, GpuSpec, ModelSpec, Plan, Price, Workload

if TYPE_CHECKING:
    from .perf.step import PerfContext
    from .planner.sweep import SweepResult
    from .planner.traffic import Demand


def plan(model: str | ModelSpec, gpu: str | GpuSpec, *, engine: str = registry.DEFAULT,
         engine_version: str | None = None, workload: Workload | None = None,
         revision: str | None = None, token: str | None = None, offline: bool | None = None,
         gpu_hour_price: float | None = None, minimize_utilization: bool = False,
         demand: Demand | None = None, **knobs: Any) -> Plan:
    """Plan one deployment on `engine` (see `kvplan.engines.registry.names()`). `model` is a
    ModelSpec, a local path, a catalogue id or a Hub repo id (`revision`, `token`, `offline`
    apply to the Hub). `knobs` use vLLM's flag names with underscores (tensor_parallel_size=2,
    max_model_len=32768, …) plus gpu_memory_gib; each engine maps them to its own flags.
    `gpu_hour_price` (USD per GPU-hour) overrides the catalogue's default price.
    `minimize_utilization`: recommend the smallest budget fraction that meets the workload
    instead of keeping the engine's default. `demand`: a request trace and/or a rate curve
    (planner.traffic.Demand; the CLI reads them from --trace / --traffic files).

    Raises KvplanError subclasses for bad input; a deployment that does not fit is a Plan with
    fits=False, not an exception."""
    return plan_with_context(
        model, gpu, engine=engine, engine_version=engine_version, workload=workload,
        revision=revision, token=token, offline=offline, gpu_hour_price=gpu_hour_price,
        minimize_utilization=minimize_utilization, demand=demand, **knobs)[0]


def plan_with_context(model: str | ModelSpec, gpu: str | GpuSpec, *,
                      engine: str = registry.DEFAULT, engine_version: str | None = None,
                      workload: Workload | None = None, revision: str | None = None,
                      token: str | None = None, offline: bool | None = None,
                      gpu_hour_price: float | None = None, minimize_utilization: bool = False,
                      demand: Demand | None = None, **knobs: Any
                      ) -> tuple[Plan, PerfContext | None]:
    """plan() (the same arguments), and the latency model's context (kvplan.perf.step) its
    performance figures were computed with: the deployment's quantization (a format what-if
    too), per-GPU weight bytes, expert-parallel layout, links, speculative decoding, batching
    flags, on the deployment the launch line starts (a plan that does not fit as stated but
    recommends a --gpu-memory-utilization that does: at that one), at its max_num_seqs and
    token budget. None when the plan has no figures. kvplan calibrate and
    benchmarks/traffic_validation.py replay measured runs with it."""
    k = Knobs.parse(knobs)
    m = model if isinstance(model, ModelSpec) else resolve_model(
        model, revision=revision, token=token, offline=offline)
    g = gpu if isinstance(gpu, GpuSpec) else resolve_gpu(gpu)
    return _plan_and_context(
        m, g, with_draft(k, token=token, offline=offline), engine=engine,
        engine_version=engine_version, workload=workload, price=_price(g, gpu_hour_price),
        minimize_utilization=minimize_utilization, larger_gpus=larger_gpus(g), demand=demand)


def plan_disagg(model: str | ModelSpec, gpu: str | GpuSpec, *, engine: str = registry.DEFAULT,
                engine_version: str | None = None, workload: Workload | None = None,
                prefill_gpu: str | GpuSpec | None = None, decode_gpu: str | GpuSpec | None = None,
                prefill_tp: int | None = None, prefill_dp: int | None = None,
                prefill_ep: int | None = None, prefill_replicas: int | None = None,
                decode_tp: int | None = None, decode_dp: int | None = None,
                decode_ep: int | None = None, decode_replicas: int | None = None,
                kv_link_gbps: float | None = None, revision: str | None = None,
                token: str | None = None, offline: bool | None = None,
                gpu_hour_price: float | None = None,
                prefill_options: dict[str, Any] | None = None,
                decode_options: dict[str, Any] | None = None, **knobs: Any) -> DisaggPlan:
    """Plan disaggregated prefill/decode serving (docs/disagg.md): a prefill pool and a decode
    pool, each planned as plan() plans one deployment on its own GPU (`prefill_gpu` /
    `decode_gpu`, default `gpu`) and layout (each None: kvplan chooses), the KV transfer between
    them over `kv_link_gbps` per GPU, and the replicas of each that balance the workload.
    `prefill_options` / `decode_options`: knobs (as `**knobs` names them) for that pool only,
    over the shared ones (a published deployment's per-pool --chunked-prefill-size,
    --max-running-requests or memory fraction).
    Raises KvplanError for bad input (an engine without P/D among them)."""
    from .planner.disagg import PoolLayout
    from .planner.disagg import plan_disagg as _plan_disagg

    k = Knobs.parse(knobs)
    m = model if isinstance(model, ModelSpec) else resolve_model(
        model, revision=revision, token=token, offline=offline)
    g = gpu if isinstance(gpu, GpuSpec) else resolve_gpu(gpu)
    pg = g if prefill_gpu is None else (prefill_gpu if isinstance(prefill_gpu, GpuSpec)
                                        else resolve_gpu(prefill_gpu))
    dg = g if decode_gpu is None else (decode_gpu if isinstance(decode_gpu, GpuSpec)
                                       else resolve_gpu(decode_gpu))
    k = with_draft(k, token=token, offline=offline)

    def one(m: ModelSpec, gpu: GpuSpec, kn: Knobs, w: Workload, price: Price | None) -> Plan:
        return _plan(m, gpu, kn, engine=engine, engine_version=engine_version, workload=w,
                     price=price, larger_gpus=larger_gpus(gpu))

    return _plan_disagg(
        m, PoolLayout(pg, prefill_tp, prefill_dp, prefill_ep, prefill_replicas,
                      _price(pg, gpu_hour_price), _pool_options(prefill_options)),
        PoolLayout(dg, decode_tp, decode_dp, decode_ep, decode_replicas,
                   _price(dg, gpu_hour_price), _pool_options(decode_options)),
        k, engine=engine, plan_fn=one, engine_version=engine_version, workload=workload,
        link_gbps=kv_link_gbps)


def _pool_options(given: dict[str, Any] | None) -> dict[str, object] | None:
    """One pool's own knobs, checked as the shared ones are (a bad name or value raises)."""
    if not given:
        return None
    Knobs.parse(given)
    return dict(given)


def _price(gpu: GpuSpec, given: float | None) -> Price | None:
    """The user's price, else the catalogue's default for this GPU (with its source)."""
    if given is not None:
        from .sources.prices import price_error

        why = price_error(given)
        if why:
            raise InvalidInputError(f"--gpu-hour-price {why}")
        return Price(gpu_id=gpu.id, usd_per_hour=given, source="--gpu-hour-price", default=False)
    from .sources.prices import default_prices

    return default_prices(resolve_gpu).get(gpu.id)


def with_draft(k: Knobs, *, token: str | None = None, offline: bool | None = None) -> Knobs:
    """Knobs whose --speculative-config draft ("model": a catalogue id, local directory or Hub
    repo) is resolved to a ModelSpec, so the pure planner can size it. MTP and n-gram need none;
    a draft given as a ModelSpec already is kept."""
    sc = k.speculative_config
    if sc is None or sc.draft is not None or sc.model is None or sc.method in ("mtp", "ngram"):
        return k
    draft = resolve_model(sc.model, token=token, offline=offline)
    return k.model_copy(update={"speculative_config": sc.model_copy(update={"draft": draft})})


def sweep(model: str | ModelSpec, *, gpus: Sequence[str | GpuSpec] | None = None,
          engine: str | Sequence[str] = registry.DEFAULT, max_gpus: int = 8,
          quantization: str | Sequence[str | None] | None = None,
          kv_cache_dtype: str | Sequence[str | None] | None = None,
          workload: Workload | None = None, slo_tpot_ms: float | None = None,
          slo_ttft_ms: float | None = None,
          prices: str | Path | Mapping[str, float] | None = None,
          engine_version: str | None = None, revision: str | None = None,
          token: str | None = None, offline: bool | None = None, disagg: bool = False,
          rank_on: str = "pessimistic",
          **knobs: Any) -> SweepResult:
    """Every deployment of `model` kvplan can plan, ranked: the options that meet the target
    (the workload's concurrency at its lengths, `max_model_len`) first, cheapest first.

    `gpus`: ids/aliases or GpuSpecs (default: the whole catalogue). `engine`: a name, a list,
    or "all" (every registry engine). `quantization`: "auto" (the checkpoint's own) and/or
    "fp8" (online, on fp8-native GPUs), comma-separated or a list; `kv_cache_dtype`: "auto"
    and/or "fp8" likewise. Neither given: the checkpoint's own format everywhere and, on GPUs
    that run fp8 natively, fp8 weights and KV too; one given: exactly the formats named.
    `prices`: a CSV/YAML file or {gpu id: US$ per GPU-hour}, over the bundled defaults.
    `rank_on`: "pessimistic" (latency figures ranked by their bands' worse end) or "point".
    Other `knobs` as for plan(). `disagg`: add disaggregated prefill/decode services
    (plan_disagg on each priced data-centre GPU) and say which wins (docs/disagg.md). Raises
    KvplanError for bad input; nothing meeting the target is a result (SweepResult.exit_code 1)."""
    from .planner.sweep import sweep as _sweep
    from .sources.prices import default_prices, load_price_file, price_error

    m = model if isinstance(model, ModelSpec) else resolve_model(
        model, revision=revision, token=token, offline=offline)
    specs = list(gpu_specs()) if gpus is None else resolve_gpus(gpus)
    table = default_prices(resolve_gpu)
    if isinstance(prices, Mapping):
        for ref, usd in prices.items():
            gid = resolve_gpu(ref).id
            why = price_error(usd)
            if why:
                raise InvalidInputError(f"price for {ref!r}: {why}")
            table[gid] = Price(gpu_id=gid, usd_per_hour=float(usd), source="prices argument",
                               default=False)
    elif prices is not None:
        table.update(load_price_file(prices, resolve_gpu))
    engines = ([*registry.names()] if isinstance(engine, str) and engine.strip().lower() == "all"
               else _split(engine))
    native = quantization is None and kv_cache_dtype is None
    rate = workload.request_rate if workload is not None else None
    if rate is not None and workload is not None:  # every option planned without the rate first
        full = workload
        workload = workload.model_copy(update={
            "request_rate": None, "burstiness": None, "slo_percentile": None,
            "random_range_ratio": None})
    result = _sweep(m, specs, table, knobs=Knobs.parse(knobs), workload=workload,
                  engines=[e for e in engines if e], max_gpus=max_gpus,
                  # neither named: the formats each GPU runs natively (its own, and fp8)
                  quantizations=None if native else _formats(quantization, "--quantization"),
                  kv_cache_dtypes=None if native else _formats(kv_cache_dtype,
                                                                "--kv-cache-dtype"),
                  engine_version=engine_version, slo_tpot_ms=slo_tpot_ms, slo_ttft_ms=slo_ttft_ms,
                  larger_gpus=larger_gpus, rank_on=rank_on)
    if disagg:
        from .planner.sweep_disagg import disaggregated_options, with_disaggregated

        w = (workload or Workload()).model_copy(update={"slo_tpot_ms": slo_tpot_ms,
                                                        "slo_ttft_ms": slo_ttft_ms})
        extra = disaggregated_options(m, specs, table, knobs=Knobs.parse(knobs), workload=w,
                                      engines=[e for e in engines if e], max_gpus=max_gpus,
                                      engine_version=engine_version, larger_gpus=larger_gpus)
        result = with_disaggregated(result, extra)
    if rate is None:
        return result
    from .planner.traffic import rank_for_rate

    slos = {k: v for k, v in (("slo_tpot_ms", slo_tpot_ms), ("slo_ttft_ms", slo_ttft_ms))
            if v is not None}
    full = full.model_copy(update=slos)
    by_id = {g.id: g for g in specs}

    def replan(o: Any) -> Plan:
        price = (o.price_per_hour or 0.0) / o.count or None
        return plan(m, by_id[o.gpu], engine=o.engine, engine_version=engine_version,
                    workload=full, gpu_hour_price=price, **{**knobs, **o.knobs})

    return rank_for_rate(result, rate, replan)


@dataclass(frozen=True)
class ReportData:
    """Everything `kvplan report` shows about one deployment, planned: the renderer
    (kvplan.render.report.for_model) lays it out and plans nothing."""

    plan: Plan  # the deployment under review
    curve: tuple[CurvePoint, ...]  # requests its KV cache holds at each max_model_len
    curve_source: str  # how the curve was computed, as the report says it
    compare: tuple[Plan, ...]  # the same model on every registry engine, as compare plans it
    not_planned: tuple[tuple[str, str], ...]  # (engine label, why): engines that refused it
    sweep: SweepResult | None  # the cheapest alternatives for the same workload; None: none


# The engine-generic knobs every engine of the report's comparison gets.
COMPARE_KNOBS = ("tensor_parallel_size", "max_model_len", "quantization", "kv_cache_dtype",
                 "gpu_memory_gib")
# The knobs a sweep varies itself (it refuses them as fixed knobs); gpu_memory_gib overrides one
# device's total, so it does not carry to the sweep's other GPUs either.
_SWEPT_KNOBS = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
                "quantization", "kv_cache_dtype", "gpu_memory_gib")


def report(model: str | ModelSpec, gpu: str | GpuSpec, *, engine: str = registry.DEFAULT,
           engine_version: str | None = None, workload: Workload | None = None,
           revision: str | None = None, token: str | None = None, offline: bool | None = None,
           with_sweep: bool = True, gpu_hour_price: float | None = None,
           minimize_utilization: bool = False, demand: Demand | None = None,
           rank_on: str = "pessimistic", **knobs: Any) -> ReportData:
    """Plan what a sizing report shows: the deployment, its KV capacity curve (the
    planner re-run at each length where the KV is not linear in length; only the chosen point if
    the engine refuses a length), the same model on every registry engine with the
    engine-generic knobs only (an engine that cannot plan it is named with why) and, with
    `with_sweep`, the sweep of the same workload on `engine` (None when it raises; ranked as
    `rank_on` says, as `kvplan sweep --rank-on` ranks, checked first). A rate,
    percentile, trace or rate curve (`demand`) is simulated for the deployment only: the
    curve and the comparison plan the workload without them. The sweep is `kvplan sweep` of
    the same arguments: with a request rate (its burstiness and SLO percentile too) it is
    ranked by the cost per day of the replicas the rate needs, as `kvplan sweep
    --request-rate` ranks (the few cheapest simulated); the length spread, files and dataset
    of `demand`, which the sweep does not take, stay out of it."""
    from .planner.sweep import check_rank_on

    check_rank_on(rank_on)  # the sweep's own refusal, before its errors are caught below
    m = model if isinstance(model, ModelSpec) else resolve_model(
        model, revision=revision, token=token, offline=offline)
    g = gpu if isinstance(gpu, GpuSpec) else resolve_gpu(gpu)

    plain = workload.model_copy(update={
        "request_rate": None, "burstiness": None, "slo_percentile": None,
        "random_range_ratio": None}) if workload is not None else None
    # the sweep's workload: what `kvplan sweep` takes (a rate with its burstiness and
    # percentile; no length spread); without a rate, no simulation at all (a percentile alone
    # would simulate every option: minutes)
    swept_load = plain if workload is None or workload.request_rate is None else (
        workload.model_copy(update={"random_range_ratio": None}))

    def at(values: dict[str, Any], name: str, version: str | None = None,
           full: bool = False) -> Plan:
        # plan() itself, so a report says what `kvplan plan` and `kvplan compare` say of the same
        # deployment (its price, and the "a larger GPU" alternative of a plan that misses)
        return plan(m, g, engine=name, engine_version=version,
                    workload=workload if full else plain, token=token, offline=offline,
                    gpu_hour_price=gpu_hour_price, minimize_utilization=minimize_utilization,
                    demand=demand if full else None, **values)

    main = at(knobs, engine, engine_version, full=True)

    def replan(length: int) -> Plan:
        return at({**knobs, "max_model_len": length}, engine, engine_version)

    try:
        curve, how = kv_curve(main, replan)
    except KvplanError:  # a length the engine refuses: the chosen point only
        curve, how = kv_curve(main)
    generic = {k: knobs.get(k) for k in COMPARE_KNOBS}
    compare, not_planned = [], []
    for name in registry.names():
        try:
            compare.append(at(generic, name))
        except KvplanError as e:
            not_planned.append((registry.get(name).label, e.message))  # TensorRT-LLM, not trtllm
    swept = None
    if with_sweep:
        # the same knobs as the plan, less what the sweep explores itself (the layout, and the
        # weight and KV formats, which it takes as one-item lists), so its row for the reviewed
        # deployment is that very plan
        fixed = {k: v for k, v in knobs.items() if k not in _SWEPT_KNOBS}
        try:
            swept = sweep(m, engine=engine, workload=swept_load, token=token, offline=offline,
                          engine_version=engine_version,
                          quantization=[knobs.get("quantization")],
                          kv_cache_dtype=[knobs.get("kv_cache_dtype")],
                          prices=None if gpu_hour_price is None else {g.id: gpu_hour_price},
                          rank_on=rank_on, **fixed)
        except KvplanError:
            swept = None
    return ReportData(plan=main, curve=curve, curve_source=how, compare=tuple(compare),
                      not_planned=tuple(not_planned), sweep=swept)


def resolve_gpus(refs: Sequence[str | GpuSpec]) -> list[GpuSpec]:
    """GPU references, each once; every unknown one named in one error, with suggestions."""
    out: dict[str, GpuSpec] = {}
    bad: list[str] = []
    for ref in refs:
        if isinstance(ref, GpuSpec):
            out.setdefault(ref.id, ref)
            continue
        try:
            g = resolve_gpu(ref)
        except UnknownGpuError as e:
            bad.append(f"{ref!r}" + (f" (did you mean {', '.join(map(repr, e.suggestions))}?)"
                                     if e.suggestions else ""))
            continue
        out.setdefault(g.id, g)
    if bad:
        raise InvalidInputError(f"unknown GPU{'s' if len(bad) > 1 else ''} in --gpus: "
                                + ", ".join(bad), hint="run `kvplan gpus` to list known GPUs")
    return list(out.values())


def _split(value: str | Sequence[str | None] | None) -> list[str | None]:
    items = value.split(",") if isinstance(value, str) else list(value or [])
    return [None if i is None else i.strip() for i in items]


def _formats(value: str | Sequence[str | None] | None, flag: str) -> list[str | None]:
    """'auto,fp8' → [None, 'fp8'] (None: the default, as `kvplan plan` without the flag)."""
    if value is None:
        return [None]
    items = [None if not i or i.lower() == "auto" else i.lower() for i in _split(value)]
    if not items:
        raise InvalidInputError(f"{flag} lists nothing", hint="e.g. auto,fp8")
    return list(dict.fromkeys(items))


def larger_gpus(g: GpuSpec) -> list[GpuSpec]:
    """Catalogue GPUs of the same vendor with at least 10 % more memory than `g`: the "a larger
    GPU" alternative a plan that does not fit names (the first that holds it). Data-centre parts
    first (export-market parts count as such only for a user on one), then workstation, then
    desktop parts, then export-market ones; within each, the same or a newer architecture before
    an older one, then the smallest."""
    total = g.cuda_total_bytes or 0
    rank = {"data-centre": 0, "workstation": 1, "desktop": 2,
            "data-centre-export": 0 if g.segment == "data-centre-export" else 3}

    def cc(x: GpuSpec) -> tuple[int, ...] | None:  # NVIDIA's "9.0"; AMD's "gfx942" is no order
        c = x.compute_capability or ""
        return tuple(map(int, c.split("."))) if re.fullmatch(r"\d+\.\d+", c) else None

    mine = cc(g)

    def older(x: GpuSpec) -> bool:
        theirs = cc(x) if mine is not None else None
        return mine is not None and theirs is not None and theirs < mine

    return sorted((x for x in gpu_specs() if x.vendor == g.vendor and x.cuda_total_bytes
                   and x.cuda_total_bytes > 1.1 * total),
                  key=lambda x: (rank[x.segment], older(x), x.cuda_total_bytes, x.id))
