"""Which benchmark harness do the calibration rows' TTFTs follow? (docs/performance.md, Known gaps)

    python benchmarks/ttft_harness.py

Replays every row of benchmarks/data/perf_calibration.csv (aiconfigurator's silicon sample)
with the committed coefficients under each hypothesis about how the requests were sent, and
prints, per (model × GPU × engine) group, the median and p90 of |predicted / measured − 1| and
the median signed error of the mean TTFT:

* steady + overhead: kvplan's model as shipped (perf.step.evaluate: closed loop in its steady
  state, requests spread over the cycle, plus the engine's fitted request_overhead_ms);
* steady, no overhead: the same with request_overhead_ms = 0;
* burst, no overhead: kvplan.perf.simulate's closed harness, N clients started together and
  re-sending at once, 12·N requests of which the first 2·N are dropped: the harness
  aiconfigurator's own `eval` runs (src/aiconfigurator/eval/benchmarks/genai_perf_runner.py,
  commit 5e1618757742e5d185063dbcaa7de7325413f1db: genai-perf `--concurrency N
  --request-count 10N --warmup-request-count 2N`, fixed ISL/OSL with ignore_eos; its
  bench_serving runner sends 10·N prompts with `--max-concurrency N`, rate inf);
* burst + overhead: the same with the fitted request_overhead_ms.

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


def _steady_ttft_ms(ctx: perf.PerfContext, row: fit_.Row) -> float:
    return perf.evaluate(ctx, concurrency=row.concurrency, input_tokens=row.input_tokens,
                         output_tokens=row.output_tokens).ttft_ms


HYPOTHESES: dict[str, tuple[Callable[[perf.PerfContext, fit_.Row], float], bool]] = {
    "steady + overhead": (_steady_ttft_ms, True),
    "steady, no overhead": (_steady_ttft_ms, False),
    "burst, no overhead": (_burst_ttft_ms, False),
    "burst + overhead": (_burst_ttft_ms, True),
}


def _stats(errs: list[float]) -> str:
    a = [abs(e) for e in errs]
    return (f"{100 * statistics.median(a):.0f} / {100 * fit_.percentile(a, 0.9):.0f} % "
            f"({100 * statistics.median(errs):+.0f} %)")


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
            cc = c if with_overhead else dataclasses.replace(c, request_overhead_ms=0.0)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
