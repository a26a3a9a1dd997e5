"""`kvplan sweep --disagg`: disaggregated prefill/decode candidates beside the aggregated ones,
ranked together, and a note saying which wins and why, per $ and per latency target. Pure.

A disaggregated option is the whole service `kvplan plan --disagg` plans on one GPU model (both
pools on it, kvplan choosing each pool's TP and the xPyD replicas for the target); an aggregated
option is one replica holding the whole target. Both are compared per million output tokens
and against the SLOs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ..engines import pd, registry
from ..errors import KvplanError
from ..knobs import Knobs
from ..specs import DisaggPlan, GpuSpec, ModelSpec, Plan, Price, Workload
from ..units import usd_per_million_tokens
from .disagg import PoolLayout, plan_disagg
from .plan import plan as make_plan
from .sweep import (
    BAND_FIELDS,
    Miss,
    MissKind,
    Option,
    RankOn,
    SweepResult,
    Target,
    native_formats,
    rank,
)


def disaggregated_options(m: ModelSpec, gpus: Sequence[GpuSpec], prices: Mapping[str, Price],
                          *, knobs: Knobs, workload: Workload, engines: Sequence[str],
                          max_gpus: int, engine_version: str | None,
                          larger_gpus: Callable[[GpuSpec], Sequence[GpuSpec]] | None = None
                          ) -> list[Option]:
    """One disaggregated service per data-centre GPU × engine with P/D whose pools fit within
    `max_gpus` GPUs each (GPUs without a latency model or a price are skipped: the comparison
    is by $ per token and latency)."""
    out = []
    target = _target(knobs, workload)
    for name in engines:
        eng = registry.get(name)
        sup = pd.support(eng.name)
        if sup is None:
            continue
        for g in gpus:
            price = prices.get(g.id)
            if (g.segment != "data-centre" or price is None or not g.bandwidth_tbps
                    or g.vendor not in sup.vendors):
                continue

            def one(m: ModelSpec, gpu: GpuSpec, kn: Knobs, w: Workload, pr: Price | None,
                    name: str = eng.name) -> Plan:
                return make_plan(m, gpu, kn, engine=name, engine_version=engine_version,
                                 workload=w, price=pr,
                                 larger_gpus=larger_gpus(gpu) if larger_gpus else ())

            lay = PoolLayout(g, price=price, max_gpus=max_gpus)
            formats = (native_formats(m, g, eng.name, eng.unsupported)
                       if knobs.quantization is None and knobs.kv_cache_dtype is None
                       else [(knobs.quantization, knobs.kv_cache_dtype)])
            for q, kv in formats:
                k = knobs.model_copy(update={"quantization": q, "kv_cache_dtype": kv})
                try:
                    r = plan_disagg(m, lay, lay, k, engine=eng.name, plan_fn=one,
                                    engine_version=engine_version, workload=workload)
                except KvplanError:
                    continue
                d = r.disaggregated
                if max(d.prefill.gpu.count, d.decode.gpu.count) > max_gpus or not (
                        d.prefill.fits and d.decode.fits):
                    continue
                out.append(option(r, k, target))
    return out


def _target(knobs: Knobs, w: Workload) -> Target:
    return Target(max_model_len=knobs.max_model_len, target_concurrency=w.target_concurrency,
                  avg_input_tokens=w.avg_input_tokens, avg_output_tokens=w.avg_output_tokens,
                  slo_tpot_ms=w.slo_tpot_ms, slo_ttft_ms=w.slo_ttft_ms)


def option(r: DisaggPlan, knobs: Knobs, target: Target) -> Option:
    """A sweep Option for a disaggregated service: its plan is the decode pool's (GPU, layout,
    engine and KV tokens are read from it), its figures the service's."""
    d, perf = r.disaggregated, r.performance
    misses: list[Miss] = []
    if not r.fits:
        errors = [p.message for p in r.problems if p.severity == "error"]
        misses.append(Miss(MissKind.MEMORY, "memory: " + (errors[0] if errors else
                                                          "a pool does not fit")))
    if perf is not None:
        for name, limit, got in (("TPOT", target.slo_tpot_ms, perf.tpot_ms),
                                 ("TTFT", target.slo_ttft_ms, perf.ttft_ms)):
            if limit is not None and got > limit:
                misses.append(Miss(MissKind.SLO, f"SLO: predicted {name} {got:.1f} ms > "
                                   f"{limit:g} ms"))
    per_request = (target.avg_input_tokens or 0) + (target.avg_output_tokens or 0)
    needed = (target.target_concurrency or 1) * per_request
    held = d.decode.kv_cache.tokens * d.decode_replicas
    return Option(
        rank=0, meets_target=r.fits and not misses, reasons=[x.text for x in misses],
        reason_kinds=[x.kind for x in misses], pareto=False,
        headroom=round(held / needed, 4) if needed else 0.0,
        price_per_hour=perf.cost_per_hour if perf else None,
        price_source=perf.price_source if perf else None,
        cost_per_million_output_tokens=perf.cost_per_million_output_tokens if perf else None,
        tpot_ms=perf.tpot_ms if perf else None, ttft_ms=perf.ttft_ms if perf else None,
        output_tokens_per_s=perf.output_tokens_per_s if perf else None,
        # the service's own (always false: docs/disagg.md), not the decode pool plan's (none)
        calibrated=perf.calibrated if perf else None,
        # the service's bands (the pools' coefficient ranges), which a pessimistic sweep ranks
        **{name: getattr(perf, name) if perf else None for name in BAND_FIELDS},
        cost_per_million_output_tokens_high=None if perf is None else _rounded(
            usd_per_million_tokens(perf.cost_per_hour, perf.output_tokens_per_s_low)),
        knobs={**knobs.given(), "disagg": True, "prefill_replicas": d.prefill_replicas,
               "decode_replicas": d.decode_replicas,
               "prefill_tp": d.prefill.inputs["tensor_parallel_size"].value,
               "decode_tp": d.decode.inputs["tensor_parallel_size"].value,
               **_ep_knobs("prefill", d.prefill), **_ep_knobs("decode", d.decode)},
        plan=d.decode, disaggregated=True, service=r)


def _rounded(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _ep_knobs(role: str, p: Plan) -> dict[str, object]:
    """A pool's data-parallel and expert-parallel sizes, when kvplan chose them (MoE pools with
    DP attention, planner/disagg._choose_layout): EP spans TP × DP."""
    dp = int(p.inputs["data_parallel_size"].value or 1) if "data_parallel_size" in p.inputs \
        else 1
    ep = "enable_expert_parallel" in p.inputs and bool(p.inputs["enable_expert_parallel"].value)
    tp = int(p.inputs["tensor_parallel_size"].value or 1)
    out: dict[str, object] = {}
    if dp > 1:
        out[f"{role}_dp"] = dp
    if ep:
        out[f"{role}_ep"] = tp * dp
    return out


def with_disaggregated(result: SweepResult, extra: list[Option]) -> SweepResult:
    """The sweep with the disaggregated options ranked among the aggregated ones, and a note
    on which wins and why."""
    options = rank([*result.options, *extra], result.latency_model, result.rank_on)
    notes = [*result.notes, verdict(options, result.target, result.rank_on)]
    return result.model_copy(update={"options": options, "notes": notes,
                                     "candidates": result.candidates + len(extra)})


def _best(options: Sequence[Option], disagg: bool, meeting: bool,
          rank_on: RankOn) -> Option | None:
    pool = [o for o in options if o.disaggregated is disagg
            and o.ranked(rank_on)[3] is not None and (o.meets_target or not meeting)]
    return min(pool, key=lambda o: o.ranked(rank_on)[3] or 0.0, default=None)


def _describe(o: Option, rank_on: RankOn) -> str:
    ratio = f" {o.service.disaggregated.ratio}" if o.service else ""
    eps = [f"{r} EP {o.knobs[f'{r}_ep']}" for r in ("prefill", "decode") if f"{r}_ep" in o.knobs]
    ratio += f" ({', '.join(eps)}, DP attention)" if eps else ""
    ttft, tpot, _, cost = o.ranked(rank_on)
    return (f"{o.engine} on {o.count} × {o.gpu}{ratio}: ${cost or 0:,.2f}"
            f"/M tokens, TTFT {ttft or 0:,.0f} ms, TPOT {tpot or 0:.1f} ms")


def verdict(options: Sequence[Option], target: Target, rank_on: RankOn = "point") -> str:
    """Which wins, aggregated or disaggregated, per $ (all options) and per SLO (those that
    meet the target), and why; figures as the ranking reads them (`rank_on`: point estimates
    or their bands' pessimistic ends)."""
    slo = target.slo_ttft_ms is not None or target.slo_tpot_ms is not None
    agg, dis = _best(options, False, False, rank_on), _best(options, True, False, rank_on)
    if dis is None:
        return ("disaggregated: no option planned (no data-centre GPU with a price and latency "
                "figures whose pools fit, or no engine with P/D among those swept)")
    if agg is None:
        return ("disaggregated wins: the only priced option with latency figures is "
                + _describe(dis, rank_on))
    a_cost = agg.ranked(rank_on)[3] or 0
    d_cost = dis.ranked(rank_on)[3] or 0
    winner = "disaggregated" if d_cost < a_cost else "aggregated"
    why = ("its decode pool runs without prefill interference and at a larger KV cache"
           if winner == "disaggregated" else
           "the prefill pool's GPUs and the KV transfer cost more than the interference they "
           "remove at this load")
    out = (f"per $: {winner} wins ({why}) — best aggregated {_describe(agg, rank_on)}; best "
           f"disaggregated {_describe(dis, rank_on)}")
    if slo:
        agg_m, dis_m = _best(options, False, True, rank_on), _best(options, True, True, rank_on)
        if agg_m is None and dis_m is None:
            out += "; per SLO: neither meets the latency targets"
        elif agg_m is None or dis_m is None:
            which = "disaggregated" if agg_m is None else "aggregated"
            out += f"; per SLO: only {which} options meet the latency targets"
        else:
            cheaper = ("disaggregated" if (dis_m.ranked(rank_on)[3] or 0)
                       < (agg_m.ranked(rank_on)[3] or 0) else "aggregated")
            out += f"; per SLO: {cheaper} is the cheaper option that meets the targets"
    return out
