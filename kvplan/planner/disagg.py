"""Disaggregated prefill/decode planning (`kvplan plan --disagg`): a prefill pool and a decode
pool, each a full kvplan plan with its own GPU, layout and engine settings, the KV transfer
between them, the xPyD ratio that balances them for the workload, and the service's latency
and throughput. Pure; api.py resolves names. docs/disagg.md describes the model.

Memory per pool, as the engines do it (kvplan/engines/pd.py):
* the decode pool runs no prefill, so its token budget (max_num_batched_tokens) only needs one
  token per running sequence (× the tokens a speculative step verifies): its profile-run
  activation peak shrinks and its KV cache grows accordingly;
* the prefill pool keeps the engine's budget; it only holds the prompts being prefilled and
  those waiting for their transfer;
* the connector's own device buffers (TensorRT-LLM's cache transceiver) come out of the memory
  the KV cache is sized from; NIXL and mooncake register the KV cache itself and take none.

Latency (the step model of kvplan/perf/step.py on each pool, free of the other phase):
* prefill pool: a step carrying `budget` prompt tokens and no decodes; a replica computes
  budget ÷ step time prompt tokens per second;
* decode pool: a pure decode step over the running requests, TPOT = step ÷ tokens per step;
* TTFT = overhead + queue (M/D/1 at the prefill pool's utilization) + prefill + exposed KV
  transfer + the request's first decode step;
* closed loop of C requests (the harness of every kvplan figure): request rate R solves
  R · e2e(R) = C; when the prefill pool cannot keep up, R is its capacity and the rest waits.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from ..engines import pd, registry
from ..engines.base import Engine, MemoryResult
from ..errors import InvalidInputError
from ..knobs import Knobs, valid_tp_sizes
from ..perf import kv_transfer
from ..perf import step as perf
from ..specs import (
    Deployment,
    DisaggLaunch,
    DisaggPlan,
    Disaggregated,
    GpuSpec,
    KvTransfer,
    ModelSpec,
    Performance,
    Plan,
    Price,
    Problem,
    TtftParts,
    Workload,
)
from ..units import GiB, gib, largest_true, usd_per_million_tokens
from ..versions import normalize_version
from . import nodes as node_rules
from . import performance
from .plan import evaluate

Role = Literal["prefill", "decode"]
PREFILL_PORT, DECODE_PORT = 8100, 8200
# The prefill pool's busy fraction kvplan sizes it for when it chooses the replicas: at 0.8 an
# M/D/1 queue waits twice the service time on average (ρ / (2(1 − ρ))), a bounded share of TTFT.
TARGET_PREFILL_UTILIZATION = 0.8
MAX_REPLICAS = 256
HARNESS = ("closed loop at the target concurrency (vllm bench serve / genai-perf style, every "
           "request of the workload's input and output lengths), prefill and decode pools on "
           "separate GPUs, requests routed round-robin")


@dataclass(frozen=True)
class PoolLayout:
    """What the user fixed for one pool (None: kvplan chooses)."""

    gpu: GpuSpec
    tp: int | None = None
    dp: int | None = None
    ep: int | None = None
    replicas: int | None = None
    price: Price | None = None
    # knobs for this pool only, over the shared ones (a prefill pool's chunked-prefill size, a
    # decode pool's --max-running-requests or memory fraction, as published deployments set)
    options: dict[str, object] | None = None
    max_gpus: int | None = None  # the most GPUs a replica kvplan lays out may take (sweep)


PlanFn = Callable[[ModelSpec, GpuSpec, Knobs, Workload, Price | None], Plan]


@dataclass(frozen=True)
class _Pool:
    plan: Plan
    dep: Deployment
    res: MemoryResult
    ctx: perf.PerfContext


def _layout_knobs(role: Role, lay: PoolLayout, tp: int | None, m: ModelSpec
                  ) -> dict[str, object]:
    """The pool's layout as knobs: --{role}-ep N is expert parallelism across TP × DP ranks
    (vLLM's EP size is TP × DP: vllm/distributed/parallel_state.py), so it must equal them."""
    out: dict[str, object] = {}
    dp = lay.dp
    if lay.ep is not None and m.moe is None:  # named by the flag given, not the knob it sets
        raise InvalidInputError(f"--{role}-ep needs a mixture-of-experts model",
                                hint=f"{m.id} has no experts; drop --{role}-ep",
                                code="expert-parallel-needs-moe", knob=f"{role}_ep")
    if lay.ep is not None:
        if tp is None:
            tp = max(1, lay.ep // (dp or 1))
        if lay.ep != tp * (dp or 1):
            raise InvalidInputError(
                f"--{role}-ep {lay.ep} must equal --{role}-tp × --{role}-dp "
                f"({tp} × {dp or 1}): expert parallelism spans the pool's TP × DP ranks",
                hint=f"give --{role}-tp {lay.ep // (dp or 1)} or drop --{role}-ep",
                code="disagg-layout", knob=f"{role}_ep")
        out["enable_expert_parallel"] = True
    if tp is not None:
        out["tensor_parallel_size"] = tp
    if dp is not None:
        out["data_parallel_size"] = dp
    return out


def _pool_plan(role: Role, m: ModelSpec, lay: PoolLayout, knobs: Knobs, w: Workload,
               plan_fn: PlanFn, extra: dict[str, object]) -> Plan:
    """The pool at its given TP, else the smallest valid TP (up to 8) at which it fits."""
    base = {**knobs.given(), **extra, **(lay.options or {})}
    if lay.tp is not None or (lay.ep is not None):
        values = {**base, **_layout_knobs(role, lay, lay.tp, m)}
        return plan_fn(m, lay.gpu, Knobs.parse(values), w, lay.price)
    if "tensor_parallel_size" in base:  # -tp given for both pools
        return plan_fn(m, lay.gpu, Knobs.parse({**base, **_layout_knobs(role, lay, None, m)}), w,
                       lay.price)
    last: Plan | None = None
    top = min(8, node_rules.tp_limit(lay.gpu) or 8)  # never beyond the scale-up domain
    for tp in [t for t in valid_tp_sizes(m) if t <= top] or [1]:
        last = plan_fn(m, lay.gpu, Knobs.parse({**base, **_layout_knobs(role, lay, tp, m)}), w,
                       lay.price)
        if last.fits and last.memory.kv_cache_bytes > 0:
            return last
    assert last is not None
    return last


def _pool(role: Role, m: ModelSpec, lay: PoolLayout, knobs: Knobs, w: Workload,
          plan_fn: PlanFn, extra: dict[str, object], version: str, max_seqs: int) -> _Pool:
    """One pool, planned as its launch line starts it: a pool plan whose serve line sets other
    values (a recommended max_num_seqs, budget fraction: Plan.served) is planned again at them,
    so its memory, KV cache and capacity are the ones that line gets."""
    p = _pool_plan(role, m, lay, knobs, w, plan_fn, extra)
    if p.served is not None:
        extra = {**extra, **p.served.settings}
        p = _pool_plan(role, m, replace(lay, tp=int(p.inputs["tensor_parallel_size"].value or 1)),
                       knobs, w, plan_fn, extra)
    eng = registry.get(p.engine.name)
    values = {**knobs.given(), **extra, **(lay.options or {}),
              "tensor_parallel_size": int(p.inputs["tensor_parallel_size"].value or 1)}
    if "data_parallel_size" in p.inputs and p.inputs["data_parallel_size"].value:
        values["data_parallel_size"] = int(p.inputs["data_parallel_size"].value)
    if lay.ep is not None:
        values["enable_expert_parallel"] = True
    dep, res = evaluate(eng, m, lay.gpu, Knobs.parse(values), version)
    # speculative decoding at the workload's (or the method's published) acceptance, as plans
    # do; the pool's nodes as --nodes / --gpus-per-node place it
    ctx = performance.context(m, lay.gpu, dep, res, max_num_seqs=max(1, max_seqs),
                              acceptance_rate=performance.acceptance(dep, w)[0],
                              nodes=knobs.nodes, gpus_per_node=knobs.gpus_per_node)
    return _Pool(p, dep, res, ctx)


def _step_s(ctx: perf.PerfContext, **kw: float) -> float:
    return perf.step_terms(ctx, **kw).total_s * ctx.pp


@dataclass(frozen=True)
class _Service:
    rate: float  # requests/s
    ttft: TtftParts
    tpot_s: float
    e2e_s: float
    running: float  # per decode replica
    utilization: float
    saturated: bool


def _service(p: _Pool, d: _Pool, *, n: performance.Lengths, concurrency: int, prefill_reps: int,
             decode_reps: int, decode_cap: int, transfer_exposed_s: float) -> _Service:
    """The closed loop of `concurrency` requests over both pools (module docstring)."""
    i, o = n.input_tokens - n.cached_tokens, n.output_tokens
    budget = p.ctx.max_num_batched_tokens
    p_ctx = n.cached_tokens + i / 2
    t_batch = _step_s(p.ctx, decode_seqs=0, context_tokens=0, prefill_tokens=budget,
                      prefill_context_tokens=p_ctx, prefill_seqs=budget / i)
    service = i * t_batch / budget  # one prompt's share of full prefill batches, s
    cap_rate = prefill_reps / service  # requests/s the prefill pool sustains
    alone = sum(_step_s(p.ctx, decode_seqs=0, context_tokens=0, prefill_tokens=c,
                        prefill_context_tokens=p_ctx, prefill_seqs=1)
                for c in _chunks(i, budget))  # one prompt on an idle replica
    overhead = d.ctx.request_overhead_s
    per_step = perf.tokens_per_step(d.ctx)
    mean_ctx = n.input_tokens + o / 2
    steps = max(o - 1, 1) / per_step  # decode steps per request

    def tpot(running: float) -> float:
        return _step_s(d.ctx, decode_seqs=max(running, 1.0), context_tokens=mean_ctx) / per_step

    def decoding(rate: float) -> float:
        """Requests decoding per replica: the root of r = rate / replicas × a request's decode
        time at r running (Little's law), at most decode_cap. Bisection: the decode time grows
        with r, and nearly as fast as r near the throughput limit, where iterating r = f(r)
        from below stalls far under the root (166 of 297 after 30 rounds), and the shortfall
        came out as a decode wait of seconds at half occupancy."""
        k = rate / decode_reps * steps * per_step
        if k * tpot(decode_cap) >= decode_cap:
            return float(decode_cap)
        lo, hi = 0.0, float(decode_cap)
        for _ in range(40):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if k * tpot(mid) > mid else (lo, mid)
        return hi

    def parts(rate: float) -> tuple[TtftParts, float, float, float]:
        rho = min(rate / cap_rate, 0.999)
        # under load a prompt shares its prefill step with others: the step fills with ρ
        served = max(alone, t_batch * rho) if i < budget else alone
        queue = rho / (2 * (1 - rho)) * service  # M/D/1 mean wait
        running = decoding(rate)
        t = tpot(running)
        ttft = TtftParts(queue_ms=queue * 1e3, prefill_ms=served * 1e3,
                         transfer_ms=transfer_exposed_s * 1e3, first_decode_ms=t * per_step * 1e3,
                         overhead_ms=overhead * 1e3)
        total = overhead + queue + served + transfer_exposed_s + t * per_step
        return ttft, t, total + max(o - 1, 0) * t, running

    decode_max = decode_reps * decode_cap / (steps * tpot(decode_cap) * per_step)
    top = min(cap_rate * 0.99, decode_max)
    ttft, t, e2e, running = parts(top)
    if top * e2e <= concurrency:  # a pool binds before the loop is full: the rest waits
        wait = concurrency / top - e2e
        field = "queue_ms" if cap_rate * 0.99 <= decode_max else "decode_wait_ms"
        ttft = ttft.model_copy(update={field: getattr(ttft, field) + wait * 1e3})
        return _Service(rate=top, ttft=ttft, tpot_s=t, e2e_s=e2e + wait, running=running,
                        utilization=min(top / cap_rate, 1.0),
                        saturated=field == "queue_ms")
    lo, hi = 0.0, top
    for _ in range(50):  # R · e2e(R) grows with R: bisect R · e2e(R) = C
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mid * parts(mid)[2] < concurrency else (lo, mid)
    ttft, t, e2e, running = parts(lo)
    return _Service(rate=lo, ttft=ttft, tpot_s=t, e2e_s=e2e, running=running,
                    utilization=lo / cap_rate, saturated=False)


@dataclass(frozen=True)
class _Pools:
    prefill: _Pool
    decode: _Pool
    decode_extra: dict[str, object]  # what kvplan set on the decode pool
    default_seqs: int  # the decode engine's max_num_seqs
    spec: int  # tokens a decode step verifies per sequence
    tokens_in_buffer: int | None  # TensorRT-LLM max_tokens_in_buffer
    prefill_buffer: int
    decode_buffer: int


# data-parallel sizes kvplan tries for a MoE pool with expert parallelism and DP attention
# (-tp 1 -dp N --enable-expert-parallel): whole nodes and their halves, up to four nodes or the
# scale-up domain (planner/nodes.py shapes); the two smallest that fit are scored
EP_TRIES = 2


def _chooses(lay: PoolLayout, knobs: Knobs) -> bool:
    """kvplan chooses this pool's layout: neither the pool's flags nor the shared ones fix it."""
    fixed = ("tensor_parallel_size", "data_parallel_size", "enable_expert_parallel",
             "enable_dp_attention")
    given = {**knobs.given(), **(lay.options or {})}
    return lay.tp is None and lay.dp is None and lay.ep is None and not any(
        k in given for k in fixed)


def _ep_sizes(lay: PoolLayout) -> list[int]:
    per = max((s.gpus_per_node for s in lay.gpu.systems), default=8)
    top = min(max(4 * per, node_rules.tp_limit(lay.gpu) or per), lay.max_gpus or 64)
    return [g for g in (2, 4, 8, 16, 32, 64) if g <= top]


def _score(role: Role, engine: str, pool: _Pool, w: Workload,
           slo_tpot_ms: float | None = None) -> float:
    """Tokens/s per GPU of one replica of the pool in its own phase: prompt tokens in full
    prefill steps (prefill), output tokens at the requests its KV cache and batch hold, and
    with `slo_tpot_ms` at most as many as meet it (decode) — the figures
    benchmarks/disagg_validation.py compares with published ones."""
    n = performance.lengths(w, block_size=pool.res.block_size)
    gpus = pool.plan.gpu.count
    dp = pool.dep.data_parallel_size
    if role == "prefill":
        budget = pool.ctx.max_num_batched_tokens
        i = max(1, n.input_tokens - n.cached_tokens)
        t = _step_s(pool.ctx, decode_seqs=0, context_tokens=0, prefill_tokens=budget,
                    prefill_context_tokens=n.cached_tokens + i / 2, prefill_seqs=budget / i)
        return budget * dp / t / gpus
    cap = _tpot_cap(pool, n, min(_decode_kv_bound(engine, pool, n), pool.ctx.max_num_seqs),
                    slo_tpot_ms)
    if cap <= 0:
        return 0.0
    t = _step_s(pool.ctx, decode_seqs=cap, context_tokens=n.input_tokens + n.output_tokens / 2)
    return cap * perf.tokens_per_step(pool.ctx) * dp / t / gpus


def _choose_layout(role: Role, m: ModelSpec, lay: PoolLayout, knobs: Knobs, w: Workload,
                   plan_fn: PlanFn, engine: str, version: str,
                   slo_tpot_ms: float | None = None) -> tuple[PoolLayout, str | None]:
    """A MoE pool whose layout kvplan chooses: the smallest TP that fits (as for dense models)
    against expert parallelism with DP attention over the smallest GPU counts that fit
    (_ep_sizes), whichever gives more tokens per second per GPU in the pool's phase; a dense
    decode pool: _choose_decode_tp. The layout and why. Every layout keeps TP inside the
    scale-up domain (EP/DP cross nodes)."""
    if not _chooses(lay, knobs):
        return lay, None
    if m.moe is None:
        return (_choose_decode_tp(m, lay, knobs, w, plan_fn, engine, version, slo_tpot_ms)
                if role == "decode" else (lay, None))
    scored: list[tuple[float, PoolLayout, str]] = []
    tp_plan = _pool_plan(role, m, lay, knobs, w, plan_fn, {})
    if tp_plan.fits and tp_plan.memory.kv_cache_bytes > 0:
        tp = int(tp_plan.inputs["tensor_parallel_size"].value or 1)
        c = replace(lay, tp=tp)
        scored.append((_score(role, engine, _pool(role, m, c, knobs, w, plan_fn, {}, version,
                                                  8 if role == "prefill" else 256), w),
                       c, f"TP {tp}"))
    found = 0
    for g in _ep_sizes(lay):
        if found >= EP_TRIES:
            break
        c = replace(lay, tp=1, dp=g, ep=g)
        try:
            pool = _pool(role, m, c, knobs, w, plan_fn, {}, version, 256)
        except InvalidInputError:
            continue
        if pool.plan.fits and pool.plan.memory.kv_cache_bytes > 0:
            found += 1
            scored.append((_score(role, engine, pool, w), c, f"EP {g} with DP attention"))
    if not scored:
        return lay, None
    best = max(scored, key=lambda x: x[0])
    why = (f"{role} layout {best[2]}: the most {'prompt' if role == 'prefill' else 'output'} "
           "tokens/s per GPU of " + ", ".join(f"{name} ({v:,.0f})" for v, _, name in scored))
    return best[1], why


def _choose_decode_tp(m: ModelSpec, lay: PoolLayout, knobs: Knobs, w: Workload,
                      plan_fn: PlanFn, engine: str, version: str, slo_tpot_ms: float | None
                      ) -> tuple[PoolLayout, str | None]:
    """A dense decode pool: of the valid TPs from the smallest that fits up to the scale-up
    domain (≤ 8), the one with the most output tokens/s per GPU at the requests its KV cache,
    batch and the TPOT target hold (_score, on the pool as _plan_pools plans it: a token
    budget of one token per running sequence). The smallest TP that fits can hold almost no KV
    cache beside the weights (Llama-3.3-70B on two H100s under SGLang: one 4,500-token request),
    so that one replica serves one request; the pool's cost is its GPUs per request served."""
    first = _decode_pool(m, lay, knobs, w, plan_fn, version, None)[0]
    if not (first.plan.fits and first.plan.memory.kv_cache_bytes > 0):
        return lay, None
    smallest = first.dep.tensor_parallel_size
    top = min(8, node_rules.tp_limit(lay.gpu) or 8, lay.max_gpus or 8)
    scored: list[tuple[float, PoolLayout, str]] = []
    for tp in [t for t in valid_tp_sizes(m) if smallest <= t <= top]:
        c = replace(lay, tp=tp)
        pool = first if tp == smallest else _decode_pool(m, c, knobs, w, plan_fn, version,
                                                         None)[0]
        if pool.plan.fits and pool.plan.memory.kv_cache_bytes > 0:
            scored.append((_score("decode", engine, pool, w, slo_tpot_ms), c, f"TP {tp}"))
    if len(scored) < 2:
        return lay, None
    best = max(scored, key=lambda x: x[0])  # the first (smallest TP) of equal scores
    why = ("decode layout " + best[2] + ": the most output tokens/s per GPU of "
           + ", ".join(f"{name} ({v:,.0f})" for v, _, name in scored))
    return best[1], why


def _decode_pool(m: ModelSpec, decode: PoolLayout, knobs: Knobs, w: Workload, plan_fn: PlanFn,
                 version: str, decode_seqs: int | None
                 ) -> tuple[_Pool, dict[str, object], int, int]:
    """The decode pool at a token budget of one token per running sequence (× the tokens a
    speculative step verifies), at `decode_seqs` running ones when given; with what kvplan set
    on it, the sequences it runs and the tokens a step verifies per sequence."""
    probe = _pool_plan("decode", m, decode, knobs, w, plan_fn, {})
    # the sequences its launch line runs: the recommendation it sets where the workload sizes
    # the batch (as engines' command() writes it), else the engine's default
    rec = probe.recommendations.max_num_seqs.value if w.sizes_batch() else None
    seqs = int(rec or probe.inputs["max_num_seqs"].value or 256)
    spec = 1 + (probe.speculative.num_speculative_tokens if probe.speculative else 0)
    d_extra: dict[str, object] = {}
    if decode_seqs is not None or rec:  # the launch line sets it
        seqs = decode_seqs or seqs
        d_extra["max_num_seqs"] = seqs
    if knobs.max_num_batched_tokens is None and "max_num_batched_tokens" not in (
            decode.options or {}):
        d_extra["max_num_batched_tokens"] = max(seqs * spec, 256)
    return _pool("decode", m, decode, knobs, w, plan_fn, d_extra, version, seqs), d_extra, seqs, \
        spec


def _plan_pools(m: ModelSpec, prefill: PoolLayout, decode: PoolLayout, knobs: Knobs,
                w: Workload, plan_fn: PlanFn, engine: str, version: str,
                decode_seqs: int | None = None) -> _Pools:
    """Both pools' memory plans: the decode pool at a token budget of one token per running
    sequence (and at `decode_seqs` running ones when a TPOT target caps them), the connector's
    buffers (TensorRT-LLM) off the memory the KV cache is sized from."""
    d0, d_extra, seqs, spec = _decode_pool(m, decode, knobs, w, plan_fn, version, decode_seqs)
    p0 = _pool("prefill", m, prefill, knobs, w, plan_fn, {}, version, 8)
    n = performance.lengths(w, block_size=d0.res.block_size)
    sup = pd.support(engine)
    in_buffer = (pd.transceiver_tokens(n.input_tokens, p0.res.block_size)
                 if sup is not None and sup.transceiver_buffers else None)
    p_buf = pd.buffer_bytes(engine, kv_bytes_per_token=p0.plan.kv_cache.bytes_per_token,
                            block_size=p0.res.block_size, max_tokens_in_buffer=in_buffer)
    d_buf = pd.buffer_bytes(engine, kv_bytes_per_token=d0.plan.kv_cache.bytes_per_token,
                            block_size=d0.res.block_size, max_tokens_in_buffer=in_buffer)
    if p_buf:
        p0 = _pool("prefill", m, replace(prefill, tp=p0.dep.tensor_parallel_size, replicas=None,
                                                   price=None), knobs, w, plan_fn,
                   {"gpu_memory_gib": (p0.plan.memory.total_bytes - p_buf) / GiB}, version, 8)
    if d_buf:
        d_extra["gpu_memory_gib"] = (d0.plan.memory.total_bytes - d_buf) / GiB
        d0 = _pool("decode", m, replace(decode, tp=d0.dep.tensor_parallel_size, replicas=None,
                                                  price=None), knobs, w, plan_fn,
                   d_extra, version, seqs)
    return _Pools(p0, d0, d_extra, seqs, spec, in_buffer, p_buf, d_buf)


def _replicas(pools: _Pools, prefill: PoolLayout, decode: PoolLayout, w: Workload,
              n: performance.Lengths, decode_cap: int, exposed_s: float
              ) -> tuple[int, int, int, _Service, dict[str, str]]:
    """(prefill replicas, decode replicas, concurrency, service, how each was chosen): enough
    decode slots for the target, then the fewest prefill replicas that keep up with the rate
    the decode pool drains."""
    c = w.target_concurrency
    # each data-parallel rank is an engine of its own: its own batch, KV cache and queue
    p_dp, d_dp = (pools.prefill.dep.data_parallel_size, pools.decode.dep.data_parallel_size)
    per_replica = decode_cap * d_dp
    d_reps = decode.replicas or (max(1, math.ceil(c / per_replica)) if c and per_replica else 1)
    src = {"decode_replicas": "cli" if decode.replicas else
           (f"ceil(target {c} / {per_replica} requests a decode replica runs)" if c
            and per_replica else "one replica (" + ("no --target-concurrency)" if per_replica
                                                    else "no request fits one)"))}
    concurrency = c or max(1, per_replica * d_reps)

    def run(p_reps: int) -> _Service:
        return _service(pools.prefill, pools.decode, n=n, concurrency=concurrency,
                        prefill_reps=p_reps * p_dp, decode_reps=d_reps * d_dp,
                        decode_cap=max(1, decode_cap), transfer_exposed_s=exposed_s)

    if prefill.replicas:
        src["prefill_replicas"] = "cli"
        return prefill.replicas, d_reps, concurrency, run(prefill.replicas), src
    p_reps = 1
    s = run(p_reps)
    while p_reps < MAX_REPLICAS and (s.saturated or s.utilization > TARGET_PREFILL_UTILIZATION):
        p_reps += 1
        s = run(p_reps)
    src["prefill_replicas"] = (f"fewest whose utilization stays ≤ {TARGET_PREFILL_UTILIZATION:g}"
                               " at the rate the decode pool drains")
    if w.slo_ttft_ms is not None and _ttft_ms(s) > w.slo_ttft_ms:
        more = p_reps
        while more < MAX_REPLICAS and _ttft_ms(s) > w.slo_ttft_ms:
            more += 1
            s = run(more)
        if _ttft_ms(s) <= w.slo_ttft_ms:  # more prefill replicas shorten the queue enough
            src["prefill_replicas"] += f"; {more} to meet TTFT ≤ {w.slo_ttft_ms:g} ms"
            p_reps = more
        else:
            s = run(p_reps)
    return p_reps, d_reps, concurrency, s, src


def _decode_kv_bound(engine: str, d: _Pool, n: performance.Lengths) -> int:
    """Requests the decode pool's KV cache holds: the engine's own admission rule where it has
    one (SGLang's prealloc queue, engines/pd.py), else whole requests of input + output."""
    per = pd.decode_tokens_per_request(engine, n.input_tokens, n.output_tokens)
    if per is None:
        return performance.kv_bound(d.res, n)
    return d.res.usable_blocks * d.res.block_size // per


def _ttft_ms(s: _Service) -> float:
    t = s.ttft
    return (t.queue_ms + t.prefill_ms + t.transfer_ms + t.first_decode_ms + t.overhead_ms
            + t.decode_wait_ms)


def _tpot_cap(d: _Pool, n: performance.Lengths, cap: int, slo_tpot_ms: float | None) -> int:
    """The most requests a decode rank runs within the TPOT target (bisection; TPOT grows with
    the batch), at most `cap`; `cap` without a target, 0 when even one request misses it."""
    if slo_tpot_ms is None or cap <= 0:
        return cap
    per_step = perf.tokens_per_step(d.ctx)
    ctx_len = n.input_tokens + n.output_tokens / 2

    def ok(r: int) -> bool:
        return _step_s(d.ctx, decode_seqs=r, context_tokens=ctx_len) / per_step * 1e3 \
            <= slo_tpot_ms

    return largest_true(ok, cap)


def plan_disagg(m: ModelSpec, prefill: PoolLayout, decode: PoolLayout, knobs: Knobs, *,
                engine: str, plan_fn: PlanFn, engine_version: str | None = None,
                workload: Workload | None = None, link_gbps: float | None = None) -> DisaggPlan:
    """Plan the disaggregated service. `plan_fn(model, gpu, knobs, workload, price)` plans one
    deployment (api.py passes the core planner with the catalogue's larger GPUs).
    Raises InvalidInputError for an engine without P/D and for contradictory layouts; a pool
    that does not fit is a DisaggPlan with fits=False and a problem naming the pool and fix."""
    eng = registry.get(engine)
    sup = pd.support(eng.name)
    if sup is None:
        raise InvalidInputError(
            f"{eng.label} has no disaggregated prefill/decode (no KV-transfer connector)",
            hint=f"plan with --engine {' / '.join(pd.engines_with_pd())}, or drop --disagg",
            code="disagg-not-supported", knob="disagg")
    w = workload or Workload()
    version = normalize_version(engine_version) if engine_version else eng.newest_version
    link = link_gbps or kv_transfer.DEFAULT_LINK_GBPS
    plan_fn = _planned_once(plan_fn)
    lengths_only = w.model_copy(update={"target_concurrency": None, "slo_ttft_ms": None,
                                        "slo_tpot_ms": None})
    prefill, p_why = _choose_layout("prefill", m, prefill, knobs, lengths_only, plan_fn,
                                    eng.name, version)
    decode, d_why = _choose_layout("decode", m, decode, knobs, lengths_only, plan_fn, eng.name,
                                   version, w.slo_tpot_ms)
    pools = _plan_pools(m, prefill, decode, knobs, lengths_only, plan_fn, eng.name, version)
    p0, d0 = pools.prefill, pools.decode
    n = performance.lengths(w, block_size=d0.res.block_size)
    kv_cap = max(0, min(_decode_kv_bound(eng.name, d0, n), pools.default_seqs))
    decode_cap = _tpot_cap(d0, n, kv_cap, w.slo_tpot_ms)
    if 0 < decode_cap < kv_cap and knobs.max_num_seqs is None:  # the launch line caps it
        pools = _plan_pools(m, prefill, decode, knobs, lengths_only, plan_fn, eng.name, version,
                            decode_seqs=decode_cap)
        p0, d0 = pools.prefill, pools.decode
    problems = _pool_problems(eng.label, sup, pools, prefill, decode, w, n, kv_cap, decode_cap)

    i = n.input_tokens - n.cached_tokens
    budget = p0.ctx.max_num_batched_tokens
    t_alone = sum(_step_s(p0.ctx, decode_seqs=0, context_tokens=0, prefill_tokens=c,
                          prefill_context_tokens=n.cached_tokens + i / 2, prefill_seqs=1)
                  for c in _chunks(i, budget))
    tr = kv_transfer.transfer(
        tokens=n.input_tokens, prefill_bytes_per_token_per_gpu=p0.plan.kv_cache.bytes_per_token,
        decode_bytes_per_token_per_gpu=d0.plan.kv_cache.bytes_per_token,
        decode_gpus=d0.dep.tensor_parallel_size * d0.dep.pipeline_parallel_size,
        link_gbps=link, per_chunk=sup.overlap == "per_chunk", chunk_tokens=budget,
        prefill_s=t_alone)
    both_fit = p0.plan.fits and d0.plan.fits and p0.plan.memory.kv_cache_bytes > 0
    given = {"prefill_replicas": prefill.replicas, "decode_replicas": decode.replicas}
    if not both_fit:  # no service to balance: one replica each unless given
        prefill = replace(prefill, replicas=prefill.replicas or 1)
        decode = replace(decode, replicas=decode.replicas or 1)
    p_reps, d_reps, concurrency, s, src = _replicas(pools, prefill, decode, w, n, decode_cap,
                                                    tr.exposed_ms * 1e-3)
    if not both_fit:
        src = {k: "cli" if v else "not balanced: a pool does not fit" for k, v in given.items()}
    if decode_cap < kv_cap:
        src["decode_replicas"] += (f"; TPOT ≤ {w.slo_tpot_ms:g} ms caps a decode rank at "
                                   f"{decode_cap} of the {kv_cap} requests its KV cache holds")
    p_need = budget + math.ceil(s.rate / (p_reps * p0.dep.data_parallel_size)
                                * tr.time_ms * 1e-3) * n.input_tokens
    problems += _service_problems(s, p0.plan, p_reps, concurrency, n)
    gpus = p_reps * p0.plan.gpu.count + d_reps * d0.plan.gpu.count
    section = (_performance(p0, d0, s, n, w, concurrency, gpus, p_reps, d_reps, prefill.price,
                            decode.price) if decode_cap > 0 and both_fit else None)
    if section is not None and section.meets_slo is False:  # a missed target: exit 1, as a plan
        problems.append(Problem(code="disagg-slo-unmet", severity="error",
                                message=f"the service misses the latency target: TTFT "
                                f"{section.ttft_ms:,.0f} ms, TPOT {section.tpot_ms:.1f} ms"))
    launch = _launch(eng.name, sup, pools, p_reps, d_reps)
    dis = Disaggregated(
        prefill=_with_command(eng, p0.plan, launch.prefill, version),
        decode=_with_command(eng, d0.plan, launch.decode, version),
        prefill_replicas=p_reps, decode_replicas=d_reps, ratio=f"{p_reps}P{d_reps}D",
        replicas_source=src, gpus=gpus,
        prefill_tokens_per_s_per_replica=round(
            budget * p0.dep.data_parallel_size
            / _step_s(p0.ctx, decode_seqs=0, context_tokens=0, prefill_tokens=budget,
                      prefill_context_tokens=n.cached_tokens + i / 2, prefill_seqs=budget / i),
            1),
        prefill_utilization=round(s.utilization, 3),
        decode_running_per_replica=round(s.running * d0.dep.data_parallel_size, 2),
        decode_capacity_per_replica=decode_cap * d0.dep.data_parallel_size,
        prefill_kv_tokens_needed=p_need,
        kv_transfer=_transfer_json(sup, tr, pools, link, link_gbps is not None),
        ttft=_rounded(s.ttft), launch=launch, harness=HARNESS,
        notes=[*_notes(sup, pools), *(x for x in (p_why, d_why) if x)])
    fits = (p0.plan.fits and d0.plan.fits and decode_cap > 0
            and not any(p.severity == "error" for p in problems))
    return DisaggPlan(fits=fits, problems=problems, disaggregated=dis, performance=section)


def _planned_once(plan_fn: PlanFn) -> PlanFn:
    """plan_fn, each deployment planned once: the layout choice plans the decode pool at each
    TP, and _plan_pools plans the one chosen again (its first TP: the same plan from the layout
    left to kvplan), as the prefill pool when a TPOT target re-plans the decode pool. Planning
    is pure, so an equal request gets the plan already made (the plans are never changed in
    place: _with_command copies)."""
    done: list[tuple[ModelSpec, GpuSpec, Knobs, Workload, Price | None, Plan]] = []

    def once(m: ModelSpec, gpu: GpuSpec, knobs: Knobs, w: Workload, price: Price | None
             ) -> Plan:
        for mm, g, k, wl, pr, p in done:
            if mm is m and g == gpu and k == knobs and wl == w and pr == price:
                return p
        p = plan_fn(m, gpu, knobs, w, price)
        done.append((m, gpu, knobs, w, price, p))
        return p

    return once


def _pool_problems(label: str, sup: pd.PdSupport, pools: _Pools, prefill: PoolLayout,
                   decode: PoolLayout, w: Workload, n: performance.Lengths, kv_cap: int,
                   decode_cap: int) -> list[Problem]:
    """A pool that does not fit (naming it and the fix), a decode pool that holds no request
    or runs none within the TPOT target, and GPUs whose P/D path kvplan did not read."""
    roles: tuple[tuple[Role, _Pool], ...] = (("prefill", pools.prefill), ("decode", pools.decode))
    out = [_pool_misfit(role, pool.plan) for role, pool in roles
           if not pool.plan.fits or pool.plan.memory.kv_cache_bytes <= 0]
    if decode_cap == 0 and kv_cap > 0:
        out.append(Problem(
            code="disagg-slo-unmet", severity="error",
            message=f"even one request decodes slower than TPOT {w.slo_tpot_ms:g} ms on the "
            "decode pool; fix: a larger --decode-tp, fp8 weights or a faster --decode-gpu"))
    elif decode_cap == 0 and pools.decode.plan.fits:
        out.append(Problem(
            code="disagg-decode-no-room", severity="error",
            message=f"the decode pool's KV cache holds no request of {n.input_tokens} + "
            f"{n.output_tokens} tokens; fix: a larger --decode-tp or --decode-gpu"))
    for role, lay in (("prefill", prefill), ("decode", decode)):
        if lay.gpu.vendor not in sup.vendors:
            out.append(Problem(
                code="disagg-platform", severity="warning",
                message=f"the {role} pool's {lay.gpu.vendor} GPUs: kvplan read {label}'s "
                f"P/D path ({sup.connector}) for {' and '.join(sup.vendors)} GPUs only"))
    return out


def _service_problems(s: _Service, prefill: Plan, p_reps: int, concurrency: int,
                      n: performance.Lengths) -> list[Problem]:
    """The service's own problems. Too few prefill replicas (`disagg-prefill-bound`): the pool
    saturates, or it is busier than TARGET_PREFILL_UTILIZATION, the share kvplan sizes it for
    when it chooses the replicas — above it an M/D/1 queue waits more than twice the service
    time and the wait grows without bound as the utilization nears 1 (ρ / (2(1 − ρ))), so the
    prefill queue, not the prefill itself, comes to dominate TTFT. A closed loop seldom
    saturates (its clients wait for their answers, so the pool's arrivals slow down instead):
    the utilization is the signal. kvplan's own choice stays at or under it unless it hits
    MAX_REPLICAS, so the warning is in effect for replicas given (--prefill-replicas)."""
    out = []
    if s.saturated or s.utilization > TARGET_PREFILL_UTILIZATION:
        out.append(Problem(
            code="disagg-prefill-bound", severity="warning",
            message=f"{p_reps} prefill replica{'s' if p_reps > 1 else ''} cannot keep up with "
            f"{concurrency} requests in flight: the prefill pool is {s.utilization:.0%} busy "
            f"(kvplan sizes it for ≤ {TARGET_PREFILL_UTILIZATION:.0%}) and requests queue "
            f"{s.ttft.queue_ms:,.0f} ms for prefill (prefill itself "
            f"{s.ttft.prefill_ms:,.0f} ms); fix: more --prefill-replicas"))
    if prefill.fits and 0 < prefill.kv_cache.tokens < n.input_tokens:
        out.append(Problem(
            code="disagg-prefill-kv", severity="error",
            message=f"the prefill pool's KV cache ({prefill.kv_cache.tokens:,} tokens) cannot "
            f"hold one prompt of {n.input_tokens:,} tokens; fix: a larger --prefill-tp"))
    return out


def _launch(engine: str, sup: pd.PdSupport, pools: _Pools, p_reps: int,
            d_reps: int) -> DisaggLaunch:
    return DisaggLaunch(
        prefill=pd.pool_command(engine, "prefill", pools.prefill.plan.command, port=PREFILL_PORT,
                                max_tokens_in_buffer=pools.tokens_in_buffer),
        decode=pd.pool_command(engine, "decode", pools.decode.plan.command, port=DECODE_PORT,
                               max_tokens_in_buffer=pools.tokens_in_buffer),
        router=pd.router_command(engine, prefill_port=PREFILL_PORT, decode_port=DECODE_PORT,
                                 prefill_replicas=p_reps, decode_replicas=d_reps),
        sources=list(sup.sources))


def _transfer_json(sup: pd.PdSupport, tr: kv_transfer.Transfer, pools: _Pools, link: float,
                   given: bool) -> KvTransfer:
    return KvTransfer(
        connector=sup.connector, overlap=sup.overlap, tokens=tr.tokens,
        bytes_per_request=tr.bytes_per_request, send_bytes_per_gpu=tr.send_bytes_per_gpu,
        recv_bytes_per_gpu=tr.recv_bytes_per_gpu, link_gbps=link,
        link_source="--kv-link-gbps" if given else kv_transfer.LINK_SOURCE,
        time_ms=round(tr.time_ms, 3), exposed_ms=round(tr.exposed_ms, 3),
        prefill_buffer_bytes_per_gpu=pools.prefill_buffer,
        decode_buffer_bytes_per_gpu=pools.decode_buffer,
        max_tokens_in_buffer=pools.tokens_in_buffer, buffer=sup.buffer, sources=list(sup.sources))


def _notes(sup: pd.PdSupport, pools: _Pools) -> list[str]:
    notes = [*sup.prefill_notes, *sup.decode_notes]
    if "max_num_batched_tokens" in pools.decode_extra:
        notes.append(f"decode pool token budget {pools.decode_extra['max_num_batched_tokens']}: "
                     f"one token per running sequence (max_num_seqs {pools.default_seqs}"
                     + (f" × {pools.spec} verified tokens" if pools.spec > 1 else "")
                     + "), since it runs no prefill; its activation peak and KV cache follow")
    p_buf, d_buf = pools.prefill_buffer, pools.decode_buffer
    if p_buf or d_buf:  # each pool's own: sized by its KV bytes per token on one of its GPUs
        each = (f"{gib(p_buf)} per GPU in both pools" if p_buf == d_buf else
                f"{gib(p_buf)} per prefill GPU, {gib(d_buf)} per decode GPU")
        notes.append(f"cache transceiver buffers: {each} come out of the memory each pool's KV "
                     "cache is sized from (device total planned less them)")
    return notes


def _chunks(tokens: int, budget: int) -> list[int]:
    full, rest = divmod(tokens, budget)
    return [budget] * full + ([rest] if rest else [])


def _rounded(t: TtftParts) -> TtftParts:
    return TtftParts(**{k: round(v, 2) for k, v in t.model_dump().items()})


def _with_command(eng: Engine, p: Plan, command: str, version: str) -> Plan:
    """The pool's plan with its P/D launch line, and a pool that spans nodes with one line per
    node role built from it (the engine's multi-node launch, engines/multinode.py, carrying the
    P/D settings); its own performance section (an aggregated replica's, prefill and decode
    mixed) is left out: the service's is the top-level one."""
    update: dict[str, object] = {"command": command, "performance": None}
    nodes = p.nodes
    if nodes is not None and nodes.launch and nodes.nodes and nodes.gpus_per_node:
        lines = eng.node_launch(command, nodes.nodes, nodes.gpus_per_node, version)
        if lines:
            update["nodes"] = nodes.model_copy(update={"launch": lines})
    return p.model_copy(update=update)


def _pool_misfit(role: Role, p: Plan) -> Problem:
    """A pool that does not fit: which, why, and the fix (the plan's own recommendation)."""
    why = next((q.message for q in p.problems if q.severity == "error"), "no KV cache is left")
    rec = p.recommendations.tensor_parallel_size
    tp = int(p.inputs["tensor_parallel_size"].value or 1)
    fix = (f"--{role}-tp {int(rec.value)}" if rec.value and int(rec.value) != tp
           else f"a larger --{role}-gpu")
    return Problem(code=f"disagg-{role}-does-not-fit", severity="error",
                   message=f"the {role} pool does not fit on {p.gpu.count} × {p.gpu.id}: {why}; "
                   f"fix: {fix}")


def _performance(p: _Pool, d: _Pool, s: _Service, n: performance.Lengths, w: Workload,
                 concurrency: int, gpus: int, p_reps: int, d_reps: int,
                 p_price: Price | None, d_price: Price | None) -> Performance | None:
    """The service as one Performance: the same fields as a plan's, over both pools."""
    if s.rate <= 0:
        return None
    tok_s = s.rate * n.output_tokens
    ttft = s.ttft
    ttft_ms = (ttft.queue_ms + ttft.prefill_ms + ttft.transfer_ms + ttft.first_decode_ms
               + ttft.overhead_ms + ttft.decode_wait_ms)
    tpot_ms = s.tpot_s * 1e3
    lo_f, hi_f = perf.RANGES["ttft"]
    lo_p, hi_p = perf.RANGES["tpot"]
    lo_t, hi_t = perf.RANGES["throughput"]
    cost_h = None
    if p_price and d_price:
        cost_h = (p_reps * p.plan.gpu.count * p_price.usd_per_hour
                  + d_reps * d.plan.gpu.count * d_price.usd_per_hour)
    per_m = usd_per_million_tokens(cost_h or None, tok_s)
    slo = w.slo_ttft_ms is not None or w.slo_tpot_ms is not None
    meets = ((w.slo_ttft_ms is None or ttft_ms <= w.slo_ttft_ms)
             and (w.slo_tpot_ms is None or tpot_ms <= w.slo_tpot_ms))
    gaps = "; ".join(dict.fromkeys(part for x in (p.ctx.not_calibrated_because,
                                                  d.ctx.not_calibrated_because)
                                   for part in x.split("; ") if part))
    dec = perf.step_terms(d.ctx, decode_seqs=max(s.running, 1.0),
                          context_tokens=n.input_tokens + n.output_tokens / 2)
    same_price = p_price is not None and d_price is not None and \
        p_price.usd_per_hour == d_price.usd_per_hour
    return Performance(
        concurrency=concurrency,
        running=round(s.running * d_reps * d.dep.data_parallel_size),
        ttft_ms=round(ttft_ms, 2), ttft_ms_low=round(ttft_ms * lo_f, 2),
        ttft_ms_high=round(ttft_ms * hi_f, 2), tpot_ms=round(tpot_ms, 3),
        tpot_ms_low=round(tpot_ms * lo_p, 3), tpot_ms_high=round(tpot_ms * hi_p, 3),
        e2e_ms=round(s.e2e_s * 1e3, 1), output_tokens_per_s=round(tok_s, 1),
        output_tokens_per_s_low=round(tok_s * lo_t, 1),
        output_tokens_per_s_high=round(tok_s * hi_t, 1),
        output_tokens_per_s_per_gpu=round(tok_s / gpus, 1), requests_per_s=round(s.rate, 3),
        decode_bound=dec.bound, saturated=s.saturated, input_tokens=n.input_tokens,
        output_tokens=n.output_tokens, cached_tokens=n.cached_tokens,
        workload_source="cli" if n.given else "kvplan-default",
        calibrated=False,  # no disaggregated rows in the calibration data (docs/disagg.md)
        not_calibrated_because=(gaps + "; " if gaps else "")
        + "disaggregated serving has no calibration rows (each pool's step model is the "
        "aggregated fit, the queue and transfer are modelled)",
        model_version=performance.fit_name(d.ctx) + " on each pool",
        gpu_hour_price=d_price.usd_per_hour if same_price and d_price else None,
        price_source=d_price.source if same_price and d_price else
        ("per pool: " + ", ".join(f"{x.gpu_id} {x.source}" for x in (p_price, d_price) if x)
         if p_price or d_price else None),
        cost_per_hour=round(cost_h, 4) if cost_h else None,
        cost_per_million_output_tokens=round(per_m, 4) if per_m else None,
        slo_ttft_ms=w.slo_ttft_ms, slo_tpot_ms=w.slo_tpot_ms, meets_slo=meets if slo else None,
        by_concurrency=[])
