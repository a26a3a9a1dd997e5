"""The plan's performance section: the latency model (perf.py) evaluated on the deployment the
memory plan recommends, the SLO-aware max_num_seqs / max_num_batched_tokens, and cost. Pure.

Concurrency is closed-loop (a fixed number of requests in flight). TPOT is
(e2e − TTFT) / (output tokens − 1), as serving benchmarks report it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..engines import registry
from ..engines.base import MemoryResult
from ..model.weights import vocab_rows_per_rank
from ..perf import moe_gemm as _moe_gemm
from ..perf import step as perf
from ..specs import (
    Deployment,
    GpuSpec,
    ModelSpec,
    Performance,
    PerfPoint,
    Price,
    Problem,
    Recommendation,
    RoutedExperts,
    Workload,
)
from ..units import DTYPE_BYTES, fast_init, largest_true, usd_per_million_tokens
from .nodes import node_links

# The workload the section assumes when the user gives no lengths (stated in the output and
# the README): a chat turn of 1,024 prompt tokens and 256 generated tokens.
DEFAULT_INPUT_TOKENS = 1024
DEFAULT_OUTPUT_TOKENS = 256
# max_num_batched_tokens candidates for the TTFT/TPOT trade-off of chunked prefill: the
# engines' own defaults span 2,048–16,384 (vLLM get_batch_defaults, SGLang chunked_prefill).
BATCHED_TOKENS_CHOICES = (2048, 4096, 8192, 16384)


@fast_init
@dataclass(frozen=True)
class Lengths:
    input_tokens: int
    output_tokens: int
    given: bool
    cached_tokens: int = 0  # of each prompt, found in the prefix cache (prefill skips them)


def lengths(workload: Workload, *, block_size: int = 1, prefix_caching: bool = True,
            image_tokens: int = 0) -> Lengths:
    """Request lengths (a VLM's `image_tokens` sit inside the prompt: they are prefilled and
    held in the KV cache like text), and the prompt tokens the prefix cache serves: the shared
    prefix's full blocks (vLLM hashes full blocks only; SGLang's page is 1 token), at most
    input − 1 (the engine recomputes the last prompt token to sample from it)."""
    given = workload.avg_input_tokens is not None or workload.avg_output_tokens is not None
    i = (workload.avg_input_tokens or DEFAULT_INPUT_TOKENS) + image_tokens
    prefix = workload.prefix_tokens() if prefix_caching else None
    cached = min((prefix or 0) // block_size * block_size, i - 1)
    return Lengths(i, workload.avg_output_tokens or DEFAULT_OUTPUT_TOKENS, given, cached)


def at_lengths(ctx: perf.PerfContext, n: Lengths, concurrency: int) -> perf.PerfPoint:
    """perf.evaluate() for requests of lengths `n` at closed-loop `concurrency`."""
    return perf.evaluate(ctx, concurrency=concurrency, input_tokens=n.input_tokens,
                         output_tokens=n.output_tokens, cached_tokens=n.cached_tokens)


# Per-token acceptance rate assumed when the user gives none: only where a published figure
# exists. DeepSeek-V3 technical report (arXiv 2412.19437) §5.4.3: the second token its MTP
# module predicts is accepted 85–90 % of the time; the low end is used.
DEFAULT_ACCEPTANCE = {"mtp": 0.85}
ACCEPTANCE_SOURCES = {"mtp": "DeepSeek-V3 technical report §5.4.3 (MTP: 85–90 %)"}


def acceptance(dep: Deployment, w: Workload) -> tuple[float, str | None]:
    """(per-token acceptance rate, where it comes from): the user's, a published default for
    the method, else 0 — the worst case, every draft token rejected."""
    sc = dep.speculative_config
    if sc is None:
        return 0.0, None
    if w.acceptance_rate is not None:
        return w.acceptance_rate, "cli"
    if sc.method in DEFAULT_ACCEPTANCE:
        return DEFAULT_ACCEPTANCE[sc.method], ACCEPTANCE_SOURCES[sc.method]
    return 0.0, "worst case (none given): no draft token accepted"


def _speculation(m: ModelSpec, dep: Deployment, res: MemoryResult,
                 acceptance_rate: float) -> dict:
    """PerfContext fields for speculative decoding, from the plan's speculative section: k
    verified tokens (SGLang's tree: num_draft_tokens − 1), k sequential draft passes (none for
    n-gram), each reading the draft's weights — plus the target's LM head where the draft shares
    it (vLLM EAGLE-1: vllm/model_executor/models/llama_eagle.py; SGLang EAGLE/NEXTN drafts) —
    and the draft's own KV."""
    sc, ps = dep.speculative_config, res.speculative
    if sc is None or ps is None:
        return {}
    k = ps.num_speculative_tokens
    verified = (ps.num_draft_tokens - 1) if ps.num_draft_tokens else k
    # an EAGLE tree of k levels accepts one root-to-leaf path: at most k draft tokens, however
    # many it verifies (SGLang: num_steps draft passes, one level each); n-gram keeps the chain
    depth = min(k, verified) if sc.method != "ngram" else verified
    shared_head = registry.get(dep.engine).draft_shares_lm_head(sc.method)
    head_bytes = 0
    if shared_head:
        head_bytes = (vocab_rows_per_rank(m.vocab_size, dep.tensor_parallel_size)
                      * m.hidden_size * DTYPE_BYTES.get(dep.dtype, 2))
    read = ps.draft_weights_bytes + head_bytes
    fields: dict[str, Any] = dict(
        spec_tokens=verified, accept_tokens=depth, draft_steps=0 if sc.method == "ngram" else k,
        acceptance_rate=acceptance_rate, draft_read_bytes=read,
        draft_flops_per_token=2 * read // DTYPE_BYTES.get(dep.dtype, 2),
        draft_kv_bytes_per_token=ps.draft_kv_bytes_per_token, draft_layers=ps.draft_layers)
    if sc.method not in registry.get(dep.engine).calibration.overlap_drafts:
        fields["cpu_overlap"] = False  # async scheduling off with this draft (vLLM: not EAGLE/MTP)
    return fields


def context(m: ModelSpec, gpu: GpuSpec, dep: Deployment, res: MemoryResult, *,
            max_num_seqs: int, max_num_batched_tokens: int | None = None,
            acceptance_rate: float = 0.0, nodes: int | None = None,
            gpus_per_node: int | None = None) -> perf.PerfContext:
    """The latency model's view of one deployment: exact per-GPU weight bytes from the memory
    plan (the target's: a draft's weights are read by its own passes), its KV capacity, the
    batch limits the launch line sets, speculative decoding when configured, and the links its
    layout crosses on the GPU's system shape (`nodes`, `gpus_per_node`: the user's)."""
    spec = _speculation(m, dep, res, acceptance_rate)
    draft_bytes = res.speculative.draft_weights_bytes if spec and res.speculative else 0
    batched = max_num_batched_tokens or dep.max_num_batched_tokens
    if m.moe is not None:  # one rank's token budget, as the engine lays MoE layers out
        batched = registry.get(dep.engine).rank_batched_tokens(dep, batched)
    ctx = perf.context_for(
        m, gpu, dep.engine, dep.engine_version, tp=dep.tensor_parallel_size,
        pp=dep.pipeline_parallel_size, dtype=dep.dtype, kv_cache_dtype=dep.kv_cache_dtype,
        quant=dep.quant, max_num_batched_tokens=batched,
        max_num_seqs=max(1, max_num_seqs),
        weight_bytes_per_gpu=res.worst.weights_tensor_bytes - draft_bytes,
        kv_capacity_tokens=res.usable_blocks * res.block_size,
        links=node_links(gpu, dep.tensor_parallel_size, dep.pipeline_parallel_size,
                         dep.data_parallel_size, nodes=nodes, gpus_per_node=gpus_per_node),
        prefix_caching=bool(dep.enable_prefix_caching))  # (a field built in: no copy)
    ctx = _expert_parallel(ctx, m, dep)
    # the batching the deployment's own flags choose (SGLang --enable-mixed-chunk)
    spec = {**spec, **registry.get(dep.engine).batching(dep, ctx.max_num_batched_tokens)}
    return replace(ctx, **spec) if spec else ctx


def _expert_parallel(ctx: perf.PerfContext, m: ModelSpec, dep: Deployment) -> perf.PerfContext:
    """MoE layers shared by DP ranks / split over EP ranks, as the engine lays them out
    (Engine.moe_layout; kvplan/perf/expert.py); `ctx` already holds one rank's token budget
    (Engine.rank_batched_tokens, set by `context`)."""
    if m.moe is None:
        return ctx
    from ..perf import expert

    eng = registry.get(dep.engine)
    moe_dp, ep, a2a = eng.moe_layout(dep)
    return expert.apply(ctx, m, dtype=dep.dtype, quant=dep.quant, dp=dep.data_parallel_size,
                        ep=ep, moe_dp=moe_dp, all_to_all=a2a,
                        node_dedup=a2a and (dep.moe_a2a_backend or "").startswith("deepep"),
                        decode_low_latency=a2a and dep.moe_a2a_backend in (
                            "deepep", "deepep_low_latency"),
                        token_split=eng.moe_token_split(dep, m),
                        dense_mode=eng.dense_mlp_mode(dep),
                        gather_all_reduce=eng.dp_gather_all_reduce(dep))


def _routed_experts(ctx: perf.PerfContext) -> RoutedExperts | None:
    """A MoE model's routed experts: a measured kernel table's rate or the dense GEMM rate
    (perf/moe_gemm.py); None for a dense model."""
    if not ctx.expert_gemm_source:
        return None
    source = ctx.expert_gemm_source
    if ctx.expert_dtype_note:  # --- bwmxfp4 --- the experts' own GEMM dtype
        source += f"; {ctx.expert_dtype_note}"
    return RoutedExperts(rate="measured" if ctx.expert_gemm_curve else "dense",
                         table=ctx.expert_gemm_table or None, source=source,
                         public_check=ctx.moe_check or None,
                         layer_floors=ctx.floor_note or None,
                         padding=_moe_gemm.padding_note(ctx.expert_padding) or None)


def _meets(p: perf.PerfPoint, w: Workload) -> bool:
    return ((w.slo_ttft_ms is None or p.ttft_ms <= w.slo_ttft_ms)
            and (w.slo_tpot_ms is None or p.tpot_ms <= w.slo_tpot_ms))


def _percentile_mode(w: Workload) -> bool:
    """SLOs at a percentile of the closed loop (no rate: the rate's replicas are sized apart,
    planner/traffic.py)."""
    return w.slo_percentile is not None and w.request_rate is None


def _figures(ctx: perf.PerfContext, w: Workload, n: Lengths, c: int, block_size: int
             ) -> tuple[float, float, str]:
    """(TTFT ms, TPOT ms, label) the SLOs are checked on at concurrency c: the mean model's,
    or with --slo-percentile the simulated closed loop's percentile (planner/traffic.py)."""
    if _percentile_mode(w):
        from . import traffic

        mix = traffic.Mix(n.input_tokens, n.output_tokens, n.cached_tokens,
                          w.random_range_ratio or 0.0)
        res = traffic.closed_loop(ctx, mix, c, block_size)
        q = w.slo_percentile or traffic.PERCENTILE_DEFAULT
        return res.ttft.at(q), res.tpot.at(q), f"p{q} "
    at = at_lengths(ctx, n, c)
    return at.ttft_ms, at.tpot_ms, ""


def _meets_at(ctx: perf.PerfContext, w: Workload, n: Lengths, c: int, block_size: int) -> bool:
    ttft, tpot, _ = _figures(ctx, w, n, c, block_size)
    return ((w.slo_ttft_ms is None or ttft <= w.slo_ttft_ms)
            and (w.slo_tpot_ms is None or tpot <= w.slo_tpot_ms))


def largest_meeting(ctx: perf.PerfContext, w: Workload, n: Lengths, bound: int,
                    block_size: int = 16) -> int:
    """Largest concurrency in 1…bound whose TTFT and TPOT meet the SLOs (0: none): the mean
    model's, or at --slo-percentile the simulated closed loop's. Latency grows with
    concurrency, so a bisection finds it."""
    def ok(c: int) -> bool:
        return _meets_at(ctx, w, n, c, block_size)

    return largest_true(ok, bound)


def kv_bound(res: MemoryResult, n: Lengths) -> int:
    """Requests of the workload's length the KV cache holds at once, the prefix cache's full
    blocks held once (0: none)."""
    return res.requests_held(n.input_tokens + n.output_tokens, n.cached_tokens)


def _point(p: perf.PerfPoint) -> PerfPoint:
    # model_construct: every field is computed here with its type (a sweep builds thousands)
    return PerfPoint.model_construct(**_point_values(p))


def _point_values(p: perf.PerfPoint) -> dict[str, Any]:
    """A PerfPoint's fields, rounded as the plan prints them."""
    return dict(
        concurrency=p.concurrency, running=p.running, ttft_ms=round(p.ttft_ms, 2),
        ttft_ms_low=round(p.ttft_ms_low, 2), ttft_ms_high=round(p.ttft_ms_high, 2),
        tpot_ms=round(p.tpot_ms, 3), tpot_ms_low=round(p.tpot_ms_low, 3),
        tpot_ms_high=round(p.tpot_ms_high, 3), e2e_ms=round(p.e2e_ms, 1),
        output_tokens_per_s=round(p.output_tokens_per_s, 1),
        output_tokens_per_s_low=round(p.output_tokens_per_s_low, 1),
        output_tokens_per_s_high=round(p.output_tokens_per_s_high, 1),
        output_tokens_per_s_per_gpu=round(p.output_tokens_per_s_per_gpu, 1),
        requests_per_s=round(p.requests_per_s, 3), decode_bound=p.decode_bound,
        saturated=p.saturated)


def break_even_acceptance(ctx: perf.PerfContext, n: Lengths, concurrency: int) -> float | None:
    """The per-token acceptance rate at which speculative decoding's TPOT equals the TPOT
    without it, at `concurrency` (bisection; TPOT falls as acceptance rises). 0.0 when it pays
    even with every draft token rejected; None when it never pays."""
    # without the draft, the release's own scheduling (a draft may have turned its overlap off)
    plain = at_lengths(replace(ctx, spec_tokens=0, draft_steps=0, cpu_overlap=perf.overlaps_cpu(
        ctx.engine, ctx.engine_version)), n, concurrency).tpot_ms

    def pays(a: float) -> bool:
        return at_lengths(replace(ctx, acceptance_rate=a), n, concurrency).tpot_ms <= plain

    if pays(0.0):
        return 0.0
    if not pays(1.0):
        return None
    lo, hi = 0.0, 1.0
    for _ in range(20):  # 1e-6 resolution
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if pays(mid) else (mid, hi)
    return round(hi, 3)


def section(ctx: perf.PerfContext, dep: Deployment, w: Workload, n: Lengths, concurrency: int,
            bound: int, price: Price | None, acceptance_source: str | None = None,
            extra: dict[str, Any] | None = None) -> Performance:
    """The Performance object at `concurrency`, the table up to the KV bound, and cost."""
    at = at_lengths(ctx, n, concurrency)

    def table() -> list[PerfPoint]:  # computed when read (a sweep reads none)
        return [_point(p) for p in perf.concurrency_table(
            ctx, n.input_tokens, n.output_tokens, max(1, bound), n.cached_tokens)]

    gpus = dep.tensor_parallel_size * dep.pipeline_parallel_size
    cost_h = price.usd_per_hour * gpus if price else None
    per_m = usd_per_million_tokens(cost_h or None, at.output_tokens_per_s)
    slo = w.slo_ttft_ms is not None or w.slo_tpot_ms is not None
    return Performance.deferred(
        table, **_point_values(at), input_tokens=n.input_tokens,
        output_tokens=n.output_tokens, cached_tokens=n.cached_tokens,
        workload_source="cli" if n.given else "kvplan-default", calibrated=at.calibrated,
        not_calibrated_because=ctx.not_calibrated_because or None, model_version=fit_name(ctx),
        ttft_borrowed_from=ttft_lender(ctx), measured_check=ctx.measured_check or None,
        calibration=ctx.calibration or None, routed_experts=_routed_experts(ctx),
        gpu_hour_price=price.usd_per_hour if price else None,
        price_source=((price.source + (" (kvplan default)" if price.default else ""))
                      if price else None),
        cost_per_hour=round(cost_h, 4) if cost_h else None,
        cost_per_million_output_tokens=round(per_m, 4) if per_m else None,
        slo_ttft_ms=w.slo_ttft_ms, slo_tpot_ms=w.slo_tpot_ms,
        meets_slo=_meets(at, w) if slo else None, links=ctx.link or None,
        **(dict(acceptance_rate=ctx.acceptance_rate, acceptance_rate_source=acceptance_source,
                tokens_per_step=round(perf.tokens_per_step(ctx), 3),
                break_even_acceptance_rate=break_even_acceptance(ctx, n, concurrency))
           if ctx.spec_tokens else {}), **(extra or {}))


def fit_name(ctx: perf.PerfContext) -> str:
    """Which engine's fitted coefficients the prediction uses (benchmarks/data/perf_fit.json)."""
    own = registry.calibrated_by(registry.get(ctx.engine)).name
    return f"{own} fit (benchmarks/perf_fit.py)" + ("" if own == ctx.engine else
                                                    f", borrowed for {ctx.engine}")


def ttft_lender(ctx: perf.PerfContext) -> str | None:
    """The label of the engine whose TTFT terms the prediction copies (Calibration.ttft_from),
    None when the engine's own fit has them."""
    own = registry.calibrated_by(registry.get(ctx.engine)).calibration.ttft_from
    return registry.get(own).label if own else None


def slo_seqs(ctx: perf.PerfContext, w: Workload, n: Lengths, bound: int,
             cap: int | None, block_size: int = 16) -> tuple[Recommendation, int]:
    """max_num_seqs under latency SLOs: the largest concurrency that meets both SLOs and fits
    the KV cache (and the engine's own cap); the reason names the bound that binds."""
    limit = min(bound, cap) if cap else bound
    best = largest_meeting(ctx, w, n, limit, block_size)
    if best == 0:
        return Recommendation(value=None, reason="no concurrency meets the latency targets on "
                              "this deployment (see problems)"), 0
    ttft, tpot, lab = _figures(ctx, w, n, best, block_size)
    figures = f"{lab}TTFT {ttft:,.0f} ms, {lab}TPOT {tpot:.1f} ms at {best}"
    if best == limit:
        why = (f"the KV cache holds {bound} requests of {n.input_tokens + n.output_tokens} tokens"
               if limit == bound else f"the engine's limit of {cap} for this GPU")
        reason = f"{why} binds before the latency targets ({figures})"
        return Recommendation(value=best, reason=reason), best
    n_ttft, n_tpot, lab = _figures(ctx, w, n, best + 1, block_size)
    broke = []
    if w.slo_ttft_ms is not None and n_ttft > w.slo_ttft_ms:
        broke.append(f"{lab}TTFT {n_ttft:,.0f} > {w.slo_ttft_ms:g} ms")
    if w.slo_tpot_ms is not None and n_tpot > w.slo_tpot_ms:
        broke.append(f"{lab}TPOT {n_tpot:.1f} > {w.slo_tpot_ms:g} ms")
    return Recommendation(value=best, reason=f"the latency target binds: {figures}; at {best + 1} "
                          + " and ".join(broke) + f" (the KV cache would hold {bound})"), best


def unmet_slo_problem(w: Workload, n: Lengths, at: perf.PerfPoint,
                      alternatives: list[str]) -> Problem:
    """An SLO no concurrency meets: what is predicted at one request, and what would help."""
    got = []
    if w.slo_ttft_ms is not None and at.ttft_ms > w.slo_ttft_ms:
        got.append(f"TTFT {at.ttft_ms:,.0f} ms > {w.slo_ttft_ms:g} ms")
    if w.slo_tpot_ms is not None and at.tpot_ms > w.slo_tpot_ms:
        got.append(f"TPOT {at.tpot_ms:.1f} ms > {w.slo_tpot_ms:g} ms")
    helps = ("; it would be met with " + " or ".join(alternatives)) if alternatives else (
        "; a faster GPU, fp8 weights or shorter inputs are the remaining levers")
    return Problem(code="slo-unmet", severity="error",
                   message=f"even one request of {n.input_tokens}+{n.output_tokens} tokens misses "
                   f"the latency target ({', '.join(got)})" + helps)


def batched_tokens_choice(options: list[tuple[int, perf.PerfPoint]], current: int,
                          w: Workload) -> Recommendation:
    """Among max_num_batched_tokens candidates evaluated at the chosen concurrency, the one with
    the highest throughput that meets the SLOs (larger chunks: better TTFT, worse TPOT)."""
    ok = [(t, p) for t, p in options if _meets(p, w)]
    if not ok:
        return Recommendation(value=current, reason="no prefill chunk size meets the targets; "
                              "kept as is")
    # the best throughput; among candidates within 0.5 % of it (a tie in the model), the one
    # nearest the engine's own default, so the launch line changes only for a real gain
    best = max(q.output_tokens_per_s for _, q in ok)
    tokens, p = min(((t, q) for t, q in ok if q.output_tokens_per_s >= 0.995 * best),
                    key=lambda tq: (abs(tq[0] - current), tq[0]))
    if tokens == current:
        return Recommendation(value=current, reason=f"the engine default: predicted TTFT "
                              f"{p.ttft_ms:,.0f} ms, TPOT {p.tpot_ms:.1f} ms, "
                              f"{p.output_tokens_per_s:,.0f} tokens/s; other chunk sizes predict "
                              "no better")
    others = ", ".join(f"{t:,}: TTFT {q.ttft_ms:,.0f} ms / TPOT {q.tpot_ms:.1f} ms"
                       for t, q in options if t != tokens)
    return Recommendation(value=tokens, reason=f"predicted TTFT {p.ttft_ms:,.0f} ms, TPOT "
                          f"{p.tpot_ms:.1f} ms, {p.output_tokens_per_s:,.0f} tokens/s"
                          + (f" (vs {others})" if others else ""))


