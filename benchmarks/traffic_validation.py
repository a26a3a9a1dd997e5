"""Percentiles of the scheduler simulation (kvplan/perf/simulate.py) against published serving
benchmark runs that report them; prints the tables docs/traffic.md quotes.

    python benchmarks/traffic_validation.py

Each run is planned with kvplan's defaults for its model, GPU and engine plus the flags the run
states, then simulated under the run's harness (closed loop of N clients started together,
`--request-rate inf`, the run's number of prompts and lengths). Error = predicted / measured − 1.
Only runs that state the model, GPU, engine, lengths and how requests were sent are used.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kvplan.api import plan  # noqa: E402
from kvplan.perf import simulate as sim  # noqa: E402
from kvplan.perf import step as perf  # noqa: E402
from kvplan.sources.catalog import resolve_gpu, resolve_model  # noqa: E402


@dataclass(frozen=True)
class Run:
    """One published sweep: closed loop at each concurrency, fixed lengths; `points` maps the
    concurrency to the measured statistics (ms; "rps" in requests/s)."""

    name: str
    source: str
    model: str
    gpu: str
    engine: str
    input_tokens: int
    output_tokens: int
    prompts: int | None  # None: not stated (`prompts_for`)
    points: dict[int, dict[str, float]]
    knobs: dict[str, Any] = field(default_factory=dict)
    version: str | None = None  # the engine release the run states (None: kvplan's default)

    def prompts_for(self, c: int) -> int:
        """Prompts sent at concurrency c: as stated, else vllm bench serve's default."""
        return self.prompts if self.prompts is not None else 1000


RUNS = (
    # Mistral-7B-Instruct-v0.3 on one RTX 4090, vLLM (release not stated), `vllm bench serve`
    # random dataset 256 input / 128 output tokens, 300 prompts, --request-rate inf at each
    # --max-concurrency: mean, median and P99 TTFT (ms) and requests/s as published (Part 1,
    # "Full Concurrency Sweep").
    Run("Mistral-7B, RTX 4090, vLLM",
        "https://mushfiqrahman.dev/benchmarking-mistral-7b-on-rtx-4090-vllm-concurrency-"
        "latency-and-capacity-planning/",
        "mistralai/Mistral-7B-Instruct-v0.3", "rtx-4090", "vllm", 256, 128, 300,
        {4: {"rps": 2.09, "ttft_mean": 63, "ttft_p50": 53, "ttft_p99": 157},
         8: {"rps": 3.78, "ttft_mean": 79, "ttft_p50": 55, "ttft_p99": 268},
         16: {"rps": 6.44, "ttft_mean": 155, "ttft_p50": 97, "ttft_p99": 503},
         32: {"rps": 9.73, "ttft_mean": 362, "ttft_p50": 277, "ttft_p99": 938},
         48: {"rps": 11.87, "ttft_mean": 667, "ttft_p50": 840, "ttft_p99": 1483}}),
    # Qwen2.5-0.5B-Instruct (BF16) on one L4, vLLM v0.23.0 (V1), `--gpu-memory-utilization 0.6
    # --max-model-len 8192`, `vllm bench serve` 256 input / 128 output tokens, --ignore-eos,
    # --request-rate inf at each --max-concurrency (number of prompts not stated: simulated
    # with vllm bench serve's default, 1,000). Published: req/s, TTFT p50/p95, ITL p50/p95,
    # E2E p50/p95 (ms); peak KV-cache usage 1.1 %, nothing waiting ("serving/raw-vllm").
    Run("Qwen2.5-0.5B, L4, vLLM 0.23",
        "https://ai.wmx.dev/benchmarks",
        "Qwen/Qwen2.5-0.5B-Instruct", "l4", "vllm", 256, 128, None,
        {1: {"rps": 1.3, "ttft_p50": 27.0, "ttft_p95": 115.5, "itl_p50": 5.1, "e2e_p50": 679,
             "e2e_p95": 765},
         2: {"rps": 2.9, "ttft_p50": 37.8, "ttft_p95": 48.2, "itl_p50": 5.2, "e2e_p50": 698,
             "e2e_p95": 705},
         4: {"rps": 5.4, "ttft_p50": 50.1, "ttft_p95": 85.4, "itl_p50": 5.3, "e2e_p50": 722,
             "e2e_p95": 760},
         8: {"rps": 10.2, "ttft_p50": 60.9, "ttft_p95": 88.4, "itl_p50": 5.5, "e2e_p50": 772,
             "e2e_p95": 816},
         16: {"rps": 17.8, "ttft_p50": 103.8, "ttft_p95": 135.7, "itl_p50": 6.0,
              "e2e_p50": 880, "e2e_p95": 947},
         32: {"rps": 29.5, "ttft_p50": 135.3, "ttft_p95": 191.8, "itl_p50": 7.1,
              "e2e_p50": 1082, "e2e_p95": 1128}},
        knobs={"gpu_memory_utilization": 0.6, "max_model_len": 8192}, version="0.23.0"),
)


def _context(run: Run) -> tuple[perf.PerfContext, str]:
    p = plan(run.model, run.gpu, engine=run.engine, engine_version=run.version, **run.knobs)
    m, g = resolve_model(run.model), resolve_gpu(run.gpu)
    ctx = perf.context_for(  # the dtypes the plan serves (vLLM's "auto": float32 → bf16)
        m, g, run.engine, p.engine.version, tp=1, dtype=str(p.inputs["dtype"].value),
        kv_cache_dtype=str(p.inputs["kv_cache_dtype"].value),
        max_num_batched_tokens=int(p.inputs["max_num_batched_tokens"].value or 8192),
        max_num_seqs=int(p.inputs["max_num_seqs"].value or 256),
        kv_capacity_tokens=p.kv_cache.tokens)
    head = (f"{run.model} on {g.name}, {run.engine} {p.engine.version} (max_num_seqs "
            f"{ctx.max_num_seqs}, max_num_batched_tokens {ctx.max_num_batched_tokens}, KV "
            f"{p.kv_cache.tokens:,} tokens; calibrated: {ctx.calibrated}; request overhead "
            f"{ctx.coefficients.request_overhead_ms:.1f} ms)")
    return ctx, head


def _predicted(res: sim.SimResult, key: str) -> float:
    if key == "rps":
        return res.requests_per_s
    metric, stat = key.split("_")
    if metric == "itl":
        return res.itl.p50 if stat == "p50" else res.itl.at(int(stat[1:]))
    values = sorted(res.ttft_s if metric == "ttft" else res.e2e_s)
    if stat == "mean":
        return sum(values) / len(values) * 1e3
    return sim.percentile(values, float(stat[1:])) * 1e3


def replay(run: Run) -> dict[str, list[float]]:
    """Print the run's table; return the signed errors per statistic."""
    ctx, head = _context(run)
    keys = list(dict.fromkeys(k for point in run.points.values() for k in point))
    print(f"\n### {run.name}\n\n{head}\nsource: {run.source}\n")
    print("| clients | " + " | ".join(f"{k} meas / sim" for k in keys) + " |")
    print("|---:|" + "---:|" * len(keys))
    errs: dict[str, list[float]] = {k: [] for k in keys}
    for c, measured in run.points.items():
        n = run.prompts_for(c)
        res = sim.simulate(ctx, sim.Requests((run.input_tokens,) * n, (run.output_tokens,) * n),
                           sim.Harness("closed", concurrency=c), block_size=16)
        cells = []
        for k in keys:
            if k not in measured:
                cells.append("–")
                continue
            got = _predicted(res, k)
            errs[k].append(got / measured[k] - 1)
            fmt = ".2f" if k == "rps" else ",.0f" if got >= 100 else ",.1f"
            cells.append(f"{measured[k]:g} / {got:{fmt}}")
        print(f"| {c} | " + " | ".join(cells) + " |")
    print()
    for k, e in errs.items():
        print(f"{k}: median |error| {statistics.median(abs(x) for x in e):.0%}, "
              f"median signed {statistics.median(e):+.0%} ({len(e)} points)")
    return errs


def main() -> None:
    pooled: dict[str, list[float]] = {}
    for run in RUNS:
        for k, e in replay(run).items():
            pooled.setdefault(k, []).extend(e)
    print("\n### All runs\n")
    for k in ("ttft_p99", "ttft_p95", "ttft_p50", "e2e_p95", "itl_p50", "rps"):
        e = pooled.get(k, [])
        if e:
            print(f"{k}: median |error| {statistics.median(abs(x) for x in e):.0%}, median "
                  f"signed {statistics.median(e):+.0%} ({len(e)} points)")


if __name__ == "__main__":
    main()
