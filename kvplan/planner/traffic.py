"""Request rates and percentiles for the plan's performance section: the scheduler simulation
(kvplan.perf.simulate) run on the planned replica, only when the caller asks for a rate, a
trace or a percentile. Pure.

* Percentiles: TTFT / TPOT / ITL / e2e at p50, p90, p99 and mean, as the serving benchmarks
  define them, under the harness the figures assume (stated with them).
* Replicas for a rate: the fewest copies of the planned layout that serve `request_rate`
  req/s, the load spread evenly (a round-robin router), with the SLOs met at the requested
  percentile and the replica below its capacity; the load per replica and the headroom.
* A daily curve (`--traffic`): replicas per interval, peak / mean / p95 GPUs, GPU-hours and
  cost per day.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..perf import simulate as sim
from ..perf import step as perf
from ..specs import Plan, Workload

if TYPE_CHECKING:
    from .sweep import Option, SweepResult

# Requests per simulated run: enough for a stable p99 (the 99th of 1,500 is the 15th largest)
# while a plan stays well under a second per run (benchmarks/sim_speed.py: 10,000 in < 1 s).
SIM_REQUESTS = 1500
# Above this share of its capacity a replica's queue grows without bound in a long run even
# when a finite simulation still looks fine: the replica count keeps the load under it.
MAX_UTILIZATION = 0.95
SEED = 20261201
PERCENTILE_DEFAULT = 99


@dataclass(frozen=True)
class Mix:
    """The requests' lengths: the workload's means, as a distribution."""

    input_tokens: int
    output_tokens: int
    cached_tokens: int
    range_ratio: float = 0.0
    pairs: tuple[tuple[int, int], ...] = ()  # an empirical list (a trace, a file of lengths)
    histogram: sim.LengthHistogram | None = None  # a named dataset (--dataset)

    def describe(self) -> str:
        if self.histogram is not None:
            return self.histogram.about
        if self.pairs:
            return f"{len(self.pairs):,} (input, output) lengths from a file, sampled"
        if self.range_ratio:
            return (f"uniform lengths ±{self.range_ratio:.0%} around {self.input_tokens:,} in / "
                    f"{self.output_tokens:,} out (the benchmarks' random dataset)")
        return f"constant lengths {self.input_tokens:,} in / {self.output_tokens:,} out"

    def draw(self, n: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        if self.histogram is not None:
            return sim.histogram_lengths(n, self.histogram, seed=SEED)
        if self.pairs:
            return sim.sampled_lengths(n, self.pairs, seed=SEED)
        return (sim.uniform_lengths(n, self.input_tokens, self.range_ratio, seed=SEED),
                sim.uniform_lengths(n, self.output_tokens, self.range_ratio, seed=SEED + 1))


@dataclass(frozen=True)
class RateResult:
    replicas: int
    rate_per_replica: float
    capacity_rps: float  # per replica, at the largest batch the engine runs
    result: sim.SimResult
    meets: bool  # the SLOs at the percentile, at that replica count


def _run(ctx: perf.PerfContext, mix: Mix, rate: float, burstiness: float, block_size: int,
         trace: Sequence[tuple[float, int, int]] = ()) -> sim.SimResult:
    if trace:  # the trace's own times and lengths
        reqs = sim.Requests(tuple(i for _, i, _ in trace), tuple(o for _, _, o in trace),
                            tuple(t for t, _, _ in trace), "the trace's lengths")
        return sim.simulate(ctx, reqs, sim.Harness("trace"), block_size=block_size,
                            cached_tokens=mix.cached_tokens)
    ins, outs = mix.draw(SIM_REQUESTS)
    return sim.open_loop(ctx, ins, outs, rate, burstiness, lengths=mix.describe(), seed=SEED,
                         block_size=block_size, cached_tokens=mix.cached_tokens)


def _verdict(ctx: perf.PerfContext, w: Workload, mix: Mix, rate: float, block_size: int
             ) -> sim.SimResult | None:
    """_run's open loop when it meets the workload's SLOs (meets), None when it misses them:
    the run stops once the miss is certain (sim.open_loop_unless_missed), which is all a
    search needs of a count that does not hold the rate."""
    ins, outs = mix.draw(SIM_REQUESTS)
    res = sim.open_loop_unless_missed(
        ctx, ins, outs, rate, sim.Limits(w.slo_percentile or PERCENTILE_DEFAULT, w.slo_ttft_ms,
                                         w.slo_tpot_ms),
        w.burstiness or 1.0, lengths=mix.describe(), seed=SEED, block_size=block_size,
        cached_tokens=mix.cached_tokens)
    return res if res is not None and meets(res, w) else None


def meets(res: sim.SimResult, w: Workload) -> bool:
    """The SLOs at the workload's percentile (p99 unless given)."""
    q = w.slo_percentile or PERCENTILE_DEFAULT
    return ((w.slo_ttft_ms is None or res.ttft.at(q) <= w.slo_ttft_ms)
            and (w.slo_tpot_ms is None or res.tpot.at(q) <= w.slo_tpot_ms)
            and res.failed == 0)


def capacity_rps(ctx: perf.PerfContext, mix: Mix, running: int) -> float:
    """Requests/s one replica serves at most: the closed loop at the batch it runs, at most
    what its serving front end passes (servers / service time; perf/simulate.py)."""
    engine = perf.evaluate(ctx, concurrency=max(1, running), input_tokens=mix.input_tokens,
                           output_tokens=mix.output_tokens,
                           cached_tokens=mix.cached_tokens).requests_per_s
    return min(engine, frontend_rps(ctx))


def frontend_rps(ctx: perf.PerfContext) -> float:
    """Requests/s the replica's serving front end passes at most (inf: not modelled)."""
    if not ctx.front_end or ctx.frontend_service_s <= 0:
        return math.inf
    return max(1, ctx.frontend_servers) / ctx.frontend_service_s


def replicas_for(ctx: perf.PerfContext, w: Workload, mix: Mix, rate: float, block_size: int,
                 running: int, max_replicas: int = 4096, unit: int = 1,
                 seen: dict[int, sim.SimResult | None] | None = None) -> RateResult:
    """The fewest replicas that hold `rate` req/s: each below MAX_UTILIZATION of its capacity
    and, with SLOs, meeting them at the percentile in the simulation (more replicas never
    raise a replica's latency, so the search doubles, then bisects). A replica is one engine
    of the step model (a DP rank); they come `unit` at a time (the serve line's DP ranks: one
    launch starts all of them), so the count is a multiple of `unit`. `seen`: _verdict's
    results on this context and rate by copies of the serve line, read and added to (a caller
    that simulated some counts already)."""
    cap = capacity_rps(ctx, mix, running)
    seen = {} if seen is None else seen
    burst = w.burstiness or 1.0
    top = max(1, max_replicas // unit)  # copies of the serve line
    lo = max(1, math.ceil(rate / (cap * MAX_UTILIZATION) / unit))

    def ok(k: int) -> sim.SimResult | None:  # None: k copies miss the SLOs
        if k not in seen:
            seen[k] = _verdict(ctx, w, mix, rate / (k * unit), block_size)
        return seen[k]

    def result(k: int, res: sim.SimResult, good: bool) -> RateResult:
        return RateResult(k * unit, rate / (k * unit), cap, res, good)

    res = ok(lo)
    if res is not None:
        return result(lo, res, True)
    hi = lo
    while res is None and hi < top:  # double until the SLOs hold
        lo, hi = hi, min(hi * 2, top)
        res = ok(hi)
    if res is None:  # the figures shown: the largest count's whole run
        return result(hi, _run(ctx, mix, rate / (hi * unit), burst, block_size), False)
    best = res
    while hi - lo > 1:
        mid = (lo + hi) // 2
        r_mid = ok(mid)
        if r_mid is not None:
            hi, best = mid, r_mid
        else:
            lo = mid
    return result(hi, best, True)


def running_for_rate(context: Callable[[int], perf.PerfContext], w: Workload, mix: Mix,
                     rate: float, block_size: int, start: int, top: int, unit: int = 1
                     ) -> tuple[int, RateResult | None, list[tuple[int, str]]]:
    """The max_num_seqs that holds `rate` req/s at the percentile with the fewest replicas, its
    replicas_for result (None: no value holds it), and what each value tried needs
    [(max_num_seqs, the replicas; "none": no count holds the SLOs; "no fewer": not fewer than
    the best before it)]. A closed loop sizes max_num_seqs on the mean latency at a steady
    concurrency; an open loop at a rate runs few requests most of the time, and a small
    max_num_seqs makes a burst queue for a slot (its TTFT), so a larger one can meet the
    percentile with fewer replicas. Tried: `start`, doubled up to `top` (the KV cache's bound),
    stopping once a doubling saves no replica (one simulation at one copy fewer tells); the
    smallest of the fewest wins (`context(n)`: the latency model at max_num_seqs n)."""
    tried: list[tuple[int, str]] = []
    best: tuple[int, int, RateResult] | None = None  # (replicas, max_num_seqs, result)
    n = max(1, start)
    while True:
        ctx = context(n)
        seen: dict[int, sim.SimResult | None] = {}  # by copies, for replicas_for
        if best is not None:  # one simulation first: does it hold the rate with one copy less?
            fewer = best[0] // unit - 1
            if fewer >= 1:
                seen[fewer] = _verdict(ctx, w, mix, rate / (fewer * unit), block_size)
            if fewer < 1 or seen[fewer] is None:
                tried.append((n, "no fewer"))
                break  # saturated (or every slot more misses the percentile): no replica saved
        rr = replicas_for(ctx, w, mix, rate, block_size, n, unit=unit, seen=seen)
        tried.append((n, f"{rr.replicas:,}" if rr.meets else "none"))
        if not rr.meets and best is not None:
            break  # more running slots now miss the percentile (TPOT)
        if rr.meets:
            if best is not None and rr.replicas >= best[0]:
                break  # saturated: more running slots save no replica
            best = (rr.replicas, n, rr)
        if n >= top:
            break
        n = min(2 * n, top)
    return (best[1], best[2], tried) if best else (start, None, tried)


def percentiles_dict(res: sim.SimResult) -> dict[str, dict[str, float]]:
    """{ttft_ms|tpot_ms|itl_ms|e2e_ms: {p50, p90, p99, mean}}, rounded as the plan prints."""
    def one(s: sim.Stat, nd: int) -> dict[str, float]:
        return {"p50": round(s.p50, nd), "p90": round(s.p90, nd), "p99": round(s.p99, nd),
                "mean": round(s.mean, nd)}

    return {"ttft_ms": one(res.ttft, 1), "tpot_ms": one(res.tpot, 2),
            "itl_ms": one(res.itl, 2), "e2e_ms": one(res.e2e, 1)}


def closed_loop(ctx: perf.PerfContext, mix: Mix, concurrency: int, block_size: int
                ) -> sim.SimResult:
    """Percentiles at a closed-loop concurrency as the benchmarks run it: `concurrency`
    clients started together (--max-concurrency N --request-rate inf), 10 requests each."""
    n = max(10 * concurrency, 200)
    ins, outs = mix.draw(n)
    return sim.simulate(ctx, sim.Requests(ins, outs, None, mix.describe()),
                        sim.Harness("closed", concurrency=concurrency), block_size=block_size,
                        cached_tokens=mix.cached_tokens)


def rate_fields(ctx: perf.PerfContext, w: Workload, mix: Mix, *, block_size: int,
                running: int, concurrency: int, gpus: int, price_per_gpu_hour: float | None,
                trace: Sequence[tuple[float, int, int]] = (), unit: int = 1,
                known: RateResult | None = None) -> dict[str, object]:
    """The Performance fields of a rate, a trace or a percentile (see the module docstring);
    `known`: replicas_for's result for this very rate, context and max_num_seqs, when the
    caller has it (running_for_rate)."""
    q = w.slo_percentile or PERCENTILE_DEFAULT
    out: dict[str, object] = {"slo_percentile": q, "lengths": mix.describe()}
    if trace:
        res = _run(ctx, mix, 0.0, 1.0, block_size, trace)
        times = [t for t, _, _ in trace]
        span = max(times) - min(times)
        rate = (len(trace) - 1) / span if span > 0 else 0.0
        out["lengths"] = res.lengths
        out.update(harness=f"{res.harness.describe()} ({len(trace):,} requests, "
                   f"{rate:.3g} req/s on average), one replica", replicas=1,
                   request_rate=round(rate, 4), load_per_replica_rps=round(rate, 4),
                   meets_slo_at_percentile=meets(res, w),
                   percentiles=percentiles_dict(res), preemptions=res.preemptions)
        mean_in = round(sum(i for _, i, _ in trace) / len(trace))
        mean_out = round(sum(o for _, _, o in trace) / len(trace))
        cap = capacity_rps(ctx, Mix(mean_in, mean_out, min(mix.cached_tokens, mean_in - 1)),
                           running)
        out["capacity_rps_per_replica"] = round(cap, 4)
        out["headroom"] = round(1 - rate / cap, 4) if cap > 0 else None
        return out
    if w.request_rate is None:  # a percentile at the closed-loop concurrency
        res = closed_loop(ctx, mix, concurrency, block_size)
        out.update(harness=res.harness.describe(), percentiles=percentiles_dict(res),
                   meets_slo_at_percentile=meets(res, w), preemptions=res.preemptions)
        return out
    rr = known or replicas_for(ctx, w, mix, w.request_rate, block_size, running, unit=unit)
    res = rr.result
    if not rr.meets:  # no replica count holds the SLOs: the search's cap is not an answer
        out.update(
            harness=(f"{res.harness.describe()} per replica: no replica count up to "
                     f"{rr.replicas:,} holds the SLOs at {w.request_rate:g} req/s (shown: "
                     f"{rr.replicas:,} replicas)"),
            request_rate=w.request_rate, capacity_rps_per_replica=round(rr.capacity_rps, 4),
            meets_slo_at_percentile=False, percentiles=percentiles_dict(res),
            preemptions=res.preemptions)
        return out
    total_gpus = rr.replicas * gpus
    out.update(
        harness=(f"{res.harness.describe()} per replica: {w.request_rate:g} req/s over "
                 f"{rr.replicas} replica{'s' if rr.replicas > 1 else ''} (round-robin"
                 + (f"; {rr.replicas // unit} copies of the serve line's {unit} DP ranks)"
                    if unit > 1 else ")")),
        replicas=rr.replicas, request_rate=w.request_rate,
        load_per_replica_rps=round(rr.rate_per_replica, 4),
        capacity_rps_per_replica=round(rr.capacity_rps, 4),
        headroom=round(1 - rr.rate_per_replica / rr.capacity_rps, 4) if rr.capacity_rps else None,
        meets_slo_at_percentile=rr.meets, percentiles=percentiles_dict(res),
        preemptions=res.preemptions, gpus_for_rate=total_gpus,
        cost_per_day=(round(total_gpus * price_per_gpu_hour * 24, 2)
                      if price_per_gpu_hour else None))
    return out


# ------------------------------------------------------------------ daily curves


@dataclass(frozen=True)
class Demand:
    """What the user measured or expects, read from files by the CLI (sources/traffic_files):
    a trace (send time s, input tokens, output tokens per request) and/or a rate curve
    (time in hours, req/s)."""

    trace: tuple[tuple[float, int, int], ...] = ()
    curve: tuple[tuple[float, float], ...] = ()
    lengths: tuple[tuple[int, int], ...] = ()  # (input, output) per request, sampled
    dataset: sim.LengthHistogram | None = None  # a named dataset's histogram (--dataset)
    # the flag and file requests() come from, as messages name them (`--trace azure.csv`)
    requests_from: str = ""

    def asked(self) -> bool:
        return bool(self.trace or self.curve or self.lengths or self.dataset)

    def requests(self) -> list[tuple[int, int]]:
        """(input, output) tokens of each request the files give: the trace's, else the
        lengths file's; empty without either."""
        return [(i, o) for _, i, o in self.trace] or list(self.lengths)


def mix_of(w: Workload, demand: Demand | None, input_tokens: int, output_tokens: int,
           cached_tokens: int) -> Mix:
    """The lengths simulated: a lengths file's pairs or a named dataset's histogram (the mean
    model's capacity at their means), else the workload's means with its range ratio."""
    d = demand or Demand()
    if d.lengths:
        mi = round(sum(i for i, _ in d.lengths) / len(d.lengths))
        return Mix(mi, round(sum(o for _, o in d.lengths) / len(d.lengths)),
                   min(cached_tokens, mi - 1), pairs=d.lengths)
    if d.dataset is not None:
        mi = max(1, round(d.dataset.input_mean))
        return Mix(mi, max(1, round(d.dataset.output_mean)), min(cached_tokens, mi - 1),
                   histogram=d.dataset)
    return Mix(input_tokens, output_tokens, cached_tokens, w.random_range_ratio or 0.0)


def simulated(ctx: perf.PerfContext, w: Workload, demand: Demand | None, input_tokens: int,
              output_tokens: int, cached_tokens: int, *, block_size: int, running: int,
              concurrency: int, gpus: int, price_per_gpu_hour: float | None,
              metrics: dict[str, str], unit: int = 1, known: RateResult | None = None
              ) -> tuple[dict[str, object] | None, dict[str, object] | None]:
    """(Performance fields, the `traffic` section) of what the caller asked: a rate, a
    percentile or a length spread (Workload), a trace, a lengths file, a named dataset or a
    rate curve (Demand), on the lengths mix_of gives; `known`: rate_fields'."""
    d = demand or Demand()
    mix = mix_of(w, d, input_tokens, output_tokens, cached_tokens)
    extra = curve = None
    if w.simulated() or d.trace or d.lengths or d.dataset is not None:
        extra = rate_fields(ctx, w, mix, block_size=block_size, running=running,
                            concurrency=concurrency, gpus=gpus,
                            price_per_gpu_hour=price_per_gpu_hour, trace=d.trace,
                            unit=unit, known=known)
    if d.curve:
        curve = curve_section(ctx, w, mix, d.curve, block_size=block_size, running=running,
                              gpus=gpus, price_per_gpu_hour=price_per_gpu_hour,
                              metrics=metrics, unit=unit)
    return extra, curve


@dataclass(frozen=True)
class Interval:
    start: float  # hours
    requests_per_s: float
    replicas: int


def replicas_for_curve(ctx: perf.PerfContext, w: Workload, mix: Mix,
                       curve: Sequence[tuple[float, float]], *, block_size: int, running: int
                       ) -> list[Interval]:
    """Replicas per interval of a rate curve [(time, req/s)] (each distinct rate simulated
    once)."""
    return [Interval(t, r, rr.replicas if rr else 0)
            for (t, r), rr in zip(curve, _per_rate(ctx, w, mix, curve, block_size, running),
                                  strict=True)]


def _per_rate(ctx: perf.PerfContext, w: Workload, mix: Mix,
              curve: Sequence[tuple[float, float]], block_size: int, running: int,
              unit: int = 1) -> list[RateResult | None]:
    memo: dict[float, RateResult] = {}
    out: list[RateResult | None] = []
    for _, rate in curve:
        if rate <= 0:
            out.append(None)
            continue
        if rate not in memo:
            memo[rate] = replicas_for(ctx, w, mix, rate, block_size, running, unit=unit)
        out.append(memo[rate])
    return out


def _lengths_h(times: Sequence[float]) -> list[float]:
    """Each interval's length (hours): to the next time; the last as long as the median."""
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    if not gaps:
        return [24.0]
    last = sorted(gaps)[len(gaps) // 2]
    return [*gaps, last]


# Why an idle interval keeps one copy rather than none. KEDA can scale a Deployment to zero
# (ScaledObject minReplicaCount, default 0: https://keda.sh/docs/2.14/reference/scaledobject-spec/),
# but it wakes one only when a trigger's metric passes its activation threshold; the trigger here
# reads the engine's own queue gauge, which only running replicas report, so at zero nothing
# would ever wake the first copy, and requests would have no replica to wait in.
IDLE_FLOOR = ("1 copy at 0 req/s: the trigger reads the engine's queue gauge, which only a "
              "running replica reports, so a fleet scaled to zero would never scale up again "
              "(scaling from zero needs a trigger outside the engine, e.g. the router's or an "
              "HTTP proxy's request count)")


def curve_section(ctx: perf.PerfContext, w: Workload, mix: Mix,
                  curve: Sequence[tuple[float, float]], *, block_size: int, running: int,
                  gpus: int, price_per_gpu_hour: float | None,
                  metrics: dict[str, str], unit: int = 1) -> dict[str, object]:
    """The plan's `traffic` section for a rate curve: replicas per interval (DP ranks, `unit`
    to a copy of the serve line), peak / mean / p95 GPUs (time-weighted), GPU-hours and cost
    per day (the curve's span scaled to 24 h), and autoscaler values in copies of the serve
    line, what an autoscaler scales (module docstring)."""
    results = _per_rate(ctx, w, mix, curve, block_size, running, unit)
    lengths = _lengths_h([t for t, _ in curve])
    span = sum(lengths)
    # an interval whose rate no replica count serves within the SLOs has no size (None): the
    # search's cap is not a fleet, so then there is no fleet figure or cost either. An idle
    # interval (0 req/s) keeps one copy, the autoscaler's floor (IDLE_FLOOR), and is paid for
    reps: list[int | None] = [(rr.replicas if rr.meets else None) if rr else unit
                              for rr in results]
    met = [r for r in reps if r is not None]
    unmet = len(reps) - len(met)
    fleet: dict[str, object] = dict.fromkeys(
        ("peak_gpus", "mean_gpus", "p95_gpus", "gpu_hours_per_day", "cost_per_day"))
    if not unmet:
        g = [r * gpus for r in met]
        gpu_h = sum(x * h for x, h in zip(g, lengths, strict=True))
        per_day = gpu_h * 24 / span if span > 0 else 0.0
        ranked = sorted(zip(g, lengths, strict=True))
        acc, p95 = 0.0, float(ranked[-1][0])
        for x, h in ranked:
            acc += h
            if acc >= 0.95 * span:
                p95 = float(x)
                break
        fleet = {"peak_gpus": max(g), "mean_gpus": round(gpu_h / span, 2) if span > 0 else 0.0,
                 "p95_gpus": p95, "gpu_hours_per_day": round(per_day, 2),
                 "cost_per_day": round(per_day * price_per_gpu_hour, 2)
                 if price_per_gpu_hour else None}
    served = [i for i, r in enumerate(reps) if r is not None]
    auto: dict[str, object] = {}
    if served:  # the autoscaler's range and targets over the intervals a fleet serves
        peak_i = max(served, key=lambda i: curve[i][1])
        peak = results[peak_i]
        auto = {"min_replicas": max(1, min(met) // unit),
                "max_replicas": max(1, max(met) // unit),
                "planned_load_per_replica_rps": round(peak.rate_per_replica, 4)
                if peak else 0.0}
        if any(rr is None for rr in results):
            auto["min_replicas_why"] = IDLE_FLOOR
    else:
        peak = None
    if peak and metrics:
        queue = max(1, math.ceil(peak.result.mean_waiting))
        kv = round(min(0.9, max(0.05, peak.result.mean_kv_usage)), 2)
        auto["metrics"] = [
            {"name": metrics["queue"], "type": "AverageValue", "target": queue,
             "why": "mean requests waiting per replica at the peak's planned load (simulated)"},
            {"name": metrics["kv_usage"], "type": "AverageValue", "target": kv,
             "why": "mean KV-cache use per replica at that load (simulated)"}]
        auto["keda"] = {
            "minReplicaCount": auto["min_replicas"], "maxReplicaCount": auto["max_replicas"],
            "triggers": [{"type": "prometheus", "metadata": {
                "query": f"sum({metrics['queue']})", "threshold": str(queue)}}]}
    arrivals = ("Poisson" if (w.burstiness or 1.0) == 1.0
                else f"gamma (burstiness {w.burstiness:g})")
    return {
        "harness": (f"open loop per interval, {arrivals} arrivals, the rate spread over the "
                    f"interval's replicas; {mix.describe()}"
                    + ("; an idle interval keeps one copy (the autoscaler's floor)"
                       if any(rr is None for rr in results) else "")),
        "intervals": [{"time": t, "requests_per_s": r, "replicas": n,
                       "gpus": None if n is None else n * gpus}
                      for (t, r), n in zip(curve, reps, strict=True)],
        "unmet_intervals": unmet, **fleet, "autoscaler": auto}


# ------------------------------------------------------------------ sweep by rate

SIMULATED_OPTIONS = 5  # sweep --request-rate: options whose replicas are simulated


def rank_for_rate(result: SweepResult, rate: float, replan: Callable[[Option], Plan]
                  ) -> SweepResult:
    """Re-rank a sweep's meeting options by the cost per day of the replicas `rate` needs:
    estimated for every priced option from its throughput (rate ÷ 95 % of the requests/s it
    serves at its max_num_seqs; ranked on the pessimistic end, the default, at the low end of
    its throughput band), then simulated (replan: the option planned with the rate) for the
    SIMULATED_OPTIONS cheapest aggregated ones by that estimate; pessimistic, a simulated count
    is never below the low end's estimate (the simulation runs the point model). A
    disaggregated service (sweep --disagg) is estimated alike, from the requests/s its closed
    loop serves at the target concurrency (DisaggPlan.performance): the open-loop simulation
    models one engine's scheduler, not two pools and the KV transfer, so its copies are never
    simulated, and the ranking and the note say so. Misses keep their order after them."""
    pessimistic = result.rank_on == "pessimistic"
    est: list[tuple[float, Option]] = []
    rest: list[Option] = []
    for o in result.options:
        # a disaggregated service's figures are the whole service's (its plan is the decode
        # pool's): copies of the service, estimated from its closed-loop rate
        pf = o.service.performance if o.service is not None else o.plan.performance
        if (not o.meets_target or pf is None or o.price_per_hour is None
                or not pf.requests_per_s):
            rest.append(o)
            continue
        low = pf.output_tokens_per_s_low / pf.output_tokens_per_s if pessimistic and \
            pf.output_tokens_per_s else 1.0
        n = max(1, math.ceil(rate / (MAX_UTILIZATION * pf.requests_per_s * low)))
        cost = n * o.price_per_hour * 24
        est.append((cost, o.model_copy(update={"replicas_for_rate": n,
                                               "replicas_simulated": False,
                                               "cost_per_day_for_rate": round(cost, 2)})))
    est.sort(key=lambda co: co[0])
    done: list[tuple[float, Option]] = []
    simulated = 0
    for cost, o in est:
        if simulated < SIMULATED_OPTIONS and not o.disaggregated:
            simulated += 1
            pf = replan(o).performance
            if pf is not None and pf.replicas is not None:
                # pessimistic: never fewer than the band's low end needs (the estimate)
                n = max(pf.replicas, o.replicas_for_rate or 1) if pessimistic else pf.replicas
                cost = n * (o.price_per_hour or 0.0) * 24
                o = o.model_copy(update={"replicas_for_rate": n, "replicas_simulated": True,
                                         "cost_per_day_for_rate": round(cost, 2)})
        done.append((cost, o))
    done.sort(key=lambda co: (not co[1].replicas_simulated, co[0]))
    ordered = [o for _, o in done] + rest
    ranked = [o.model_copy(update={"rank": i}) for i, o in enumerate(ordered, 1)]
    disagg = any(o.disaggregated for _, o in est)
    how = (f"options that meet the target first, by the cost per day of the replicas "
           f"{rate:g} req/s needs (simulated at the SLO percentile for the "
           f"{simulated} cheapest aggregated ones by estimate, then estimated from "
           "throughput" + ("; at least what the low end of each throughput band needs"
                           if pessimistic else "")
           + ("; a disaggregated service's copies from its closed-loop requests/s, not "
              "simulated at the percentile" if disagg else "") + "); misses after, as before")
    best = [o for o in ranked if o.replicas_for_rate is not None][:3]
    note = (f"ranked by the cost per day of {rate:g} req/s: " + "; ".join(
        f"#{o.rank} {o.gpu} ×{o.count} {o.engine}: {o.replicas_for_rate} replica"
        f"{'s' if o.replicas_for_rate != 1 else ''}, ${o.cost_per_day_for_rate:,.2f}/day"
        f"{'' if o.replicas_simulated else ' (estimated)'}" for o in best)
        + ("; disaggregated services: copies estimated from the closed-loop rate, not "
           "simulated at the SLO percentile (the simulation models one engine, not two pools "
           "and the KV transfer)" if disagg else "")) if best else (
        f"--request-rate {rate:g}: no option that meets the target has a price and a latency "
        "model to size replicas with")
    return result.model_copy(update={"options": ranked, "ranking": how,
                                     "notes": [*result.notes, note]})
