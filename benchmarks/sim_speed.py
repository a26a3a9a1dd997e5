"""Speed of kvplan.perf.simulate: seconds to simulate 10,000 requests on one core.

    python benchmarks/sim_speed.py

Target (issue #27): 10,000 requests ≤ 2 s. Lengths as the serving benchmarks' `random` dataset
(range ratio 0.5); open loop (Poisson) at about 80 % of the replica's capacity, and a closed
loop of 64 clients; vLLM (decode-first chunked prefill), SGLang (prefill-first) and SGLang
with --enable-mixed-chunk ("sglang-mc": its prefill batches mixed with the running decodes).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kvplan.perf import simulate as sim  # noqa: E402
from kvplan.perf import step as perf  # noqa: E402
from kvplan.sources.catalog import resolve_gpu, resolve_model  # noqa: E402

N = 10_000
CASES = [("meta-llama/Llama-3.1-8B-Instruct", 1, 1000, 200),
         ("meta-llama/Llama-3.1-70B-Instruct", 4, 2000, 300)]


def main() -> None:
    gpu = resolve_gpu("h100-sxm-80gb")
    print(f"{'model':36s} {'engine':9s} {'harness':34s} {'s':>6s} {'steps':>7s} "
          f"{'p99 TTFT ms':>12s}")
    worst = 0.0
    for model, tp, i, o in CASES:
        m = resolve_model(model)
        for engine in ("vllm", "sglang", "sglang-mc"):
            ctx = perf.context_for(m, gpu, engine.removesuffix("-mc"), "0.12.0", tp=tp,
                                   max_num_batched_tokens=8192, max_num_seqs=256,
                                   kv_capacity_tokens=400_000)
            if engine == "sglang-mc":  # what Engine.batching gives with the flag
                ctx = dataclasses.replace(ctx, style="mixed", whole_prompts=True)
            cap = perf.evaluate(ctx, concurrency=256, input_tokens=i,
                                output_tokens=o).requests_per_s
            ins = sim.uniform_lengths(N, i, 0.5, seed=1)
            outs = sim.uniform_lengths(N, o, 0.5, seed=2)
            rate = round(0.8 * cap, 2)
            runs = [(sim.Harness("open", request_rate=rate),
                     sim.Requests(ins, outs, sim.gamma_arrivals(N, rate, seed=3))),
                    (sim.Harness("closed", concurrency=64), sim.Requests(ins, outs))]
            for h, reqs in runs:
                t = time.perf_counter()
                res = sim.simulate(ctx, reqs, h, block_size=16 if engine == "vllm" else 1)
                dt = time.perf_counter() - t
                worst = max(worst, dt)
                label = (f"open {rate:g} req/s" if h.kind == "open"
                         else f"closed {h.concurrency} clients")
                print(f"{model:36s} {engine:9s} {label:34s} {dt:6.2f} {res.steps:7d} "
                      f"{res.ttft.p99:12,.0f}")
    print(f"slowest: {worst:.2f} s for {N:,} requests (target ≤ 2 s)")


if __name__ == "__main__":
    main()
