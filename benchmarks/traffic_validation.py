"""Percentiles of the scheduler simulation (kvplan/perf/simulate.py) against published serving
benchmark runs that report them; prints the table docs/traffic.md quotes.

    python benchmarks/traffic_validation.py

Each run is planned with kvplan's defaults for its model, GPU and engine (the runs used the
engine's defaults), then simulated under the run's harness (closed loop of N clients started
together, `--request-rate inf`, the run's number of prompts and lengths). Error = predicted /
measured − 1.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kvplan.api import plan  # noqa: E402
from kvplan.perf import simulate as sim  # noqa: E402
from kvplan.perf import step as perf  # noqa: E402
from kvplan.sources.catalog import resolve_gpu, resolve_model  # noqa: E402

# Mistral-7B-Instruct-v0.3 on one RTX 4090, vLLM (release not stated), `vllm bench serve`
# random dataset 256 input / 128 output tokens, 300 prompts, --request-rate inf at each
# --max-concurrency: mean, median and P99 TTFT (ms) and requests/s as published in
# https://mushfiqrahman.dev/benchmarking-mistral-7b-on-rtx-4090-vllm-concurrency-latency-and-capacity-planning/
# (Part 1, "Full Concurrency Sweep").
SOURCE = ("https://mushfiqrahman.dev/benchmarking-mistral-7b-on-rtx-4090-vllm-concurrency-"
          "latency-and-capacity-planning/")
MODEL, GPU, ENGINE, INPUT, OUTPUT, PROMPTS = ("mistralai/Mistral-7B-Instruct-v0.3", "rtx-4090",
                                              "vllm", 256, 128, 300)
# concurrency: (requests/s, mean TTFT, median TTFT, P99 TTFT)
RUNS = {4: (2.09, 63, 53, 157), 8: (3.78, 79, 55, 268), 16: (6.44, 155, 97, 503),
        32: (9.73, 362, 277, 938), 48: (11.87, 667, 840, 1483)}


def main() -> None:
    p = plan(MODEL, GPU, engine=ENGINE)
    m, g = resolve_model(MODEL), resolve_gpu(GPU)
    ctx = perf.context_for(
        m, g, ENGINE, p.engine.version, tp=1,
        max_num_batched_tokens=int(p.inputs["max_num_batched_tokens"].value or 8192),
        max_num_seqs=int(p.inputs["max_num_seqs"].value or 256),
        kv_capacity_tokens=p.kv_cache.tokens)
    print(f"{MODEL} on {g.name}, {ENGINE} {p.engine.version} (defaults: max_num_seqs "
          f"{ctx.max_num_seqs}, max_num_batched_tokens {ctx.max_num_batched_tokens}, KV "
          f"{p.kv_cache.tokens:,} tokens; calibrated: {ctx.calibrated})")
    print(f"source: {SOURCE}")
    print("| clients | req/s meas / sim | mean TTFT meas / sim | p50 TTFT meas / sim "
          "| p99 TTFT meas / sim | p99 error |")
    print("|---:|---:|---:|---:|---:|---:|")
    errs: dict[str, list[float]] = {"p99": [], "p50": [], "mean": [], "rps": []}
    for c, (rps, mean, med, p99) in RUNS.items():
        reqs = sim.Requests((INPUT,) * PROMPTS, (OUTPUT,) * PROMPTS)
        res = sim.simulate(ctx, reqs, sim.Harness("closed", concurrency=c), block_size=16)
        for key, got, want in (("p99", res.ttft.p99, p99), ("p50", res.ttft.p50, med),
                               ("mean", res.ttft.mean, mean), ("rps", res.requests_per_s, rps)):
            errs[key].append(got / want - 1)
        print(f"| {c} | {rps:.2f} / {res.requests_per_s:.2f} | {mean} / {res.ttft.mean:,.0f} | "
              f"{med} / {res.ttft.p50:,.0f} | {p99} / {res.ttft.p99:,.0f} | "
              f"{res.ttft.p99 / p99 - 1:+.0%} |")
    for key, label in (("p99", "p99 TTFT"), ("p50", "median TTFT"), ("mean", "mean TTFT"),
                       ("rps", "requests/s")):
        ape = [abs(e) for e in errs[key]]
        print(f"{label}: median |error| {statistics.median(ape):.0%}, median signed "
              f"{statistics.median(errs[key]):+.0%}")


if __name__ == "__main__":
    main()
