"""Which benchmark harness do the calibration rows' TTFTs follow? (docs/performance.md, Known gaps)

    python benchmarks/ttft_harness.py

Replays every row of benchmarks/data/perf_calibration.csv (aiconfigurator's silicon sample)
with the committed coefficients under each hypothesis about how the requests were sent, and
prints, per (model × GPU × engine) group, the median and p90 of |predicted / measured − 1| and
the median signed error of the mean TTFT:

* shipped: kvplan's model as shipped (perf.step.evaluate: vLLM's wait is burst_share × the
  lock-step burst queue, at least the steady-state one; SGLang's lock-step waves; plus the
  engine's fitted request_overhead_ms);
* steady + overhead: the closed loop in its steady state alone (evaluate(wait_model="mva"):
  requests spread over the cycle), with the shipped request_overhead_ms;
* steady, no overhead: the same with request_overhead_ms = 0;
* burst, no overhead: kvplan.perf.simulate's closed harness, N clients started together and
  re-sending at once, 12·N requests of which the first 2·N are dropped: the harness
  aiconfigurator's own `eval` runs (src/aiconfigurator/eval/benchmarks/genai_perf_runner.py,
  commit 5e1618757742e5d185063dbcaa7de7325413f1db: genai-perf `--concurrency N
  --request-count 10N --warmup-request-count 2N`, fixed ISL/OSL with ignore_eos; its
  bench_serving runner sends 10·N prompts with `--max-concurrency N`, rate inf);
* burst + overhead: the same with the fitted request_overhead_ms.

Then the evidence for the fitted form's burst share (perf.step.burst_wait_s; docs/performance.md,
Known gaps), per group:

* output-length spread: at a fixed (TP, input length, concurrency), measured TTFT max / min over
  the output lengths, median over such series, against the same spread of the steady-state
  queue alone (evaluate(wait_model="mva"), no request overhead): in a steady state the arrival
  rate, hence the queue, falls as outputs grow; in a burst it does not;
* implied burst share: (measured TTFT − a lone prompt's prefill step − the request overhead) /
  burst_wait_s(concurrency), median and p10–p90, over the rows that run every request at once
  and are not prefill-bound (kvplan's plan of them).

It also prints, per group, the share of rows whose measured TTFT is below the lock-step floor:
the mean TTFT of N identical prompts that arrive together, prefilled first-come first-served in
steps of max_num_batched_tokens at 100 % of the GPU's dense peak (GEMMs only, no attention, no
overhead; `lockstep_floor_ms`). A row below its floor cannot have been measured in lock step.

No fitting here: the numbers are what the shipped coefficients predict.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import perf_fit  # noqa: E402

from kvplan.engines.registry import fitted_coefficients  # noqa: E402
from kvplan.perf import fit as fit_  # noqa: E402
from kvplan.perf import simulate as sim  # noqa: E402
from kvplan.perf import step as perf  # noqa: E402

WARMUP_ROUNDS, MEASURED_ROUNDS = 2, 10  # genai_perf_runner.py: warm-up 2·N, request count 10·N


def lockstep_floor_ms(n: int, isl: int, budget: int, flops_per_token: float,
                      peak_flops_per_s: float) -> float:
    """Mean TTFT (ms) of n prompts of isl tokens that arrive together and are prefilled in
    order, `budget` tokens per step, each step costing its tokens × flops_per_token /
    peak_flops_per_s; a prompt's first token comes at the end of the step that computes its
    last token (vLLM's chunked prefill). A lower bound: no attention, overhead or decode."""
    step_s = min(budget, n * isl) * flops_per_token / peak_flops_per_s
    steps = [math.ceil(i * isl / budget) for i in range(1, n + 1)]
    return 1e3 * step_s * statistics.fmean(steps)


def _burst_ttft_ms(ctx: perf.PerfContext, row: fit_.Row) -> float:
    n = row.concurrency * (WARMUP_ROUNDS + MEASURED_ROUNDS)
    reqs = sim.Requests((row.input_tokens,) * n, (row.output_tokens,) * n)
    res = sim.simulate(ctx, reqs, sim.Harness("closed", concurrency=row.concurrency))
    kept = res.ttft_s[WARMUP_ROUNDS * row.concurrency:] or res.ttft_s
    return 1e3 * statistics.fmean(kept)


def _shipped_ttft_ms(ctx: perf.PerfContext, row: fit_.Row) -> float:
    return perf.evaluate(ctx, concurrency=row.concurrency, input_tokens=row.input_tokens,
                         output_tokens=row.output_tokens).ttft_ms


def _steady_ttft_ms(ctx: perf.PerfContext, row: fit_.Row) -> float:
    return perf.evaluate(ctx, concurrency=row.concurrency, input_tokens=row.input_tokens,
                         output_tokens=row.output_tokens, wait_model="mva").ttft_ms


HYPOTHESES: dict[str, tuple[Callable[[perf.PerfContext, fit_.Row], float], bool]] = {
    "shipped": (_shipped_ttft_ms, True),
    "steady + overhead": (_steady_ttft_ms, True),
    "steady, no overhead": (_steady_ttft_ms, False),
    "burst, no overhead": (_burst_ttft_ms, False),
    "burst + overhead": (_burst_ttft_ms, True),
}


def _stats(errs: list[float]) -> str:
    a = [abs(e) for e in errs]
    return (f"{100 * statistics.median(a):.0f} / {100 * fit_.percentile(a, 0.9):.0f} % "
            f"({100 * statistics.median(errs):+.0f} %)")


def implied_share(ctx: perf.PerfContext, row: fit_.Row) -> float | None:
    """(measured TTFT − a lone prompt's prefill step − request overhead) / burst_wait_s: the share
    of the lock-step burst queue the row waited; None for a row kvplan plans KV-limited or
    prefill-bound, or with one client."""
    assert row.ttft_ms is not None
    pt = perf.evaluate(ctx, concurrency=row.concurrency, input_tokens=row.input_tokens,
                       output_tokens=row.output_tokens)
    if row.concurrency < 2 or pt.running < row.concurrency or pt.saturated:
        return None
    i = row.input_tokens
    lone = perf._step_s(ctx, 0.0, 0.0, i, i / 2, 1.0)
    # whole-prompt admission (SGLang --enable-mixed-chunk) drains the burst in steps that also
    # decode the running requests; the token-budget form ignores them
    burst = perf.burst_wait_s(ctx, row.concurrency, i, i / 2, pt.running,
                              i + row.output_tokens / 2)
    return (row.ttft_ms * 1e-3 - lone - ctx.request_overhead_s) / burst


def osl_spread(rows: list[fit_.Row], coeffs: dict[str, perf.Coefficients]
               ) -> tuple[float, float, int]:
    """Median over (TP, input length, concurrency) series with ≥ 2 output lengths of max / min
    TTFT across the series: (measured, steady-state queue alone without overhead, series)."""
    series: dict[tuple, list[fit_.Row]] = {}
    for r in rows:
        series.setdefault((r.context.tp, r.input_tokens, r.concurrency), []).append(r)
    meas, mva = [], []
    for rs in series.values():
        if len({r.output_tokens for r in rs}) < 2:
            continue
        m = [r.ttft_ms for r in rs if r.ttft_ms is not None]
        ctxs = [dataclasses.replace(r.context, coefficients=dataclasses.replace(
            coeffs[r.key], request_overhead_ms=0.0, dynamo_front_end_ms=0.0)) for r in rs]
        p = [perf.evaluate(c, concurrency=r.concurrency, input_tokens=r.input_tokens,
                           output_tokens=r.output_tokens, wait_model="mva").ttft_ms
             for c, r in zip(ctxs, rs, strict=True)]
        meas.append(max(m) / min(m))
        mva.append(max(p) / min(p))
    if not meas:
        return math.nan, math.nan, 0
    return statistics.median(meas), statistics.median(mva), len(meas)


def evidence(rows: list[fit_.Row], coeffs: dict[str, perf.Coefficients]) -> None:
    """Print the output-length spread and the implied burst share per group."""
    print("\nBurst share evidence, per group (shipped coefficients):")
    print("| group | TTFT spread over output lengths, measured | same, steady-state queue "
          "| series | implied burst share, median (p10–p90) | rows |")
    print("|---|---:|---:|---:|---:|---:|")
    for g in sorted({r.group for r in rows}):
        rs = [r for r in rows if r.group == g]
        spread_m, spread_q, n = osl_spread(rs, coeffs)
        shares = [s for s in (implied_share(dataclasses.replace(
            r.context, coefficients=coeffs[r.key]), r) for r in rs) if s is not None]
        share = (f"{statistics.median(shares):.2f} ({fit_.percentile(shares, 0.1):.2f}–"
                 f"{fit_.percentile(shares, 0.9):.2f})" if shares else "—")
        print(f"| {g.replace(' | ', ' × ')} | {spread_m:.2f} | {spread_q:.2f} | {n} | "
              f"{share} | {len(shares)} |")


def main() -> int:
    rows = [r for r in perf_fit.load_rows() if r.ttft_ms is not None]
    coeffs = fitted_coefficients()
    groups = sorted({r.group for r in rows})
    errs: dict[str, dict[str, list[float]]] = {h: {g: [] for g in groups} for h in HYPOTHESES}
    below: dict[str, list[bool]] = {g: [] for g in groups}
    for r in rows:
        assert r.ttft_ms is not None
        c = coeffs[r.key]
        for h, (fn, with_overhead) in HYPOTHESES.items():
            cc = c if with_overhead else dataclasses.replace(c, request_overhead_ms=0.0,
                                                             dynamo_front_end_ms=0.0)
            ctx = dataclasses.replace(r.context, coefficients=cc)
            errs[h][r.group].append(fn(ctx, r) / r.ttft_ms - 1)
        x = r.context
        floor = lockstep_floor_ms(r.concurrency, r.input_tokens, x.max_num_batched_tokens,
                                  x.dense_flops_per_token + x.expert_flops_per_token,
                                  x.peak_flops_per_s)
        below[r.group].append(r.ttft_ms < floor)
    print("Mean TTFT, median / p90 APE (median signed error), per held-in group:")
    print("| group | rows | " + " | ".join(HYPOTHESES) + " | below lock-step floor |")
    print("|---|---:|" + "---:|" * (len(HYPOTHESES) + 1))
    for g in groups:
        n = len(below[g])
        print(f"| {g.replace(' | ', ' × ')} | {n} | "
              + " | ".join(_stats(errs[h][g]) for h in HYPOTHESES)
              + f" | {sum(below[g])} / {n} |")
    every = {h: [e for g in groups for e in errs[h][g]] for h in HYPOTHESES}
    print(f"| all | {len(rows)} | " + " | ".join(_stats(every[h]) for h in HYPOTHESES)
          + f" | {sum(sum(v) for v in below.values())} / {len(rows)} |")
    evidence(rows, coeffs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
