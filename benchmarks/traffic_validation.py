"""Percentiles of the scheduler simulation (kvplan/perf/simulate.py) against published serving
benchmark runs that report them; prints the tables docs/traffic.md quotes.

    python benchmarks/traffic_validation.py            # print every point and the tables
    python benchmarks/traffic_validation.py --write    # write docs/traffic-validation.md
    python benchmarks/traffic_validation.py --check    # exit 1 when that page is stale

Each run is planned with kvplan's defaults for its model, GPU and engine plus the flags the run
states, then simulated under the run's harness (closed loop of N clients started together,
`--request-rate inf`, the run's number of prompts and lengths). Error = predicted / measured − 1.
Only runs that state the model, GPU, engine, lengths and how requests were sent are used.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kvplan.api import plan_with_context  # noqa: E402
from kvplan.engines import registry  # noqa: E402
from kvplan.perf import simulate as sim  # noqa: E402
from kvplan.perf import step as perf  # noqa: E402
from kvplan.sources.catalog import resolve_gpu  # noqa: E402


@dataclass(frozen=True)
class Point:
    """One measured run: `clients` sending `prompts` requests of fixed lengths (a closed loop;
    clients = prompts: every request sent at once), the statistics as published (ms; "rps"
    in requests/s)."""

    clients: int
    input_tokens: int
    output_tokens: int
    prompts: int
    measured: dict[str, float]


@dataclass(frozen=True)
class Run:
    """One published deployment and its measured points."""

    name: str
    group: str  # the publisher: errors are reported per group and pooled
    source: str
    model: str
    gpu: str
    engine: str
    points: tuple[Point, ...]
    knobs: dict[str, Any] = field(default_factory=dict)
    version: str | None = None  # the engine release the run states (None: kvplan's default)
    tp: int = 1


def _sweep(input_tokens: int, output_tokens: int, prompts: int,
           by_clients: dict[int, dict[str, float]]) -> tuple[Point, ...]:
    return tuple(Point(c, input_tokens, output_tokens, prompts, m) for c, m in by_clients.items())


GPUSTACK_URL = ("https://github.com/gpustack/gpustack/blob/47277d79f4a5bae12a2d25e9ecbed2a2177a5f2d"
                "/docs/performance-lab/")


GPUSTACK_KEYS = ("rps", "ttft_mean", "ttft_p50", "ttft_p99", "tpot_mean", "tpot_p99")


def _gpustack(page: str, model: str, gpu: str, engine: str, version: str,
              points: tuple[tuple[float, ...], ...], *, tp: int = 1,
              knobs: dict[str, Any] | None = None) -> Run:
    """A GPUStack performance-lab page's "Other Benchmark Cases" of one serving command: `vllm
    bench serve --dataset-name random` (range ratio 0: fixed lengths) at `--request-rate inf`
    without --max-concurrency, so every prompt is sent at once. A point is (prompts, total
    input tokens, total generated tokens, *GPUSTACK_KEYS) as printed; the lengths simulated
    are the totals per request (no --ignore-eos: some answers end early)."""
    pts = []
    for n, tin, tout, *stats in points:
        k = int(n)
        pts.append(Point(k, round(tin / k), max(1, round(tout / k)), k,
                         dict(zip(GPUSTACK_KEYS, stats, strict=True))))
    name = f"{model.split('/')[-1]}, {gpu}{f' ×{tp}' if tp > 1 else ''}, {engine} {version}"
    return Run(name, "GPUStack performance lab", GPUSTACK_URL + page + ".md", model, gpu,
               engine, tuple(pts), knobs or {}, version, tp)


RUNS = (
    # Mistral-7B-Instruct-v0.3 on one RTX 4090, vLLM (release not stated), `vllm bench serve`
    # random dataset 256 input / 128 output tokens asked, 300 prompts, --request-rate inf at
    # each --max-concurrency: mean, median and P99 TTFT (ms) and requests/s as published (Part
    # 1, "Full Concurrency Sweep"). The answers end at EOS (no --ignore-eos stated): the
    # published output tokens/s ÷ requests/s is 99.7-100.5 tokens at every concurrency
    # (benchmarks/perf_latency.py M4090_PUBLISHED), so the run is replayed with 100-token
    # outputs, the published mean (their spread is not published).
    Run("Mistral-7B, RTX 4090, vLLM", "mushfiqrahman.dev",
        "https://mushfiqrahman.dev/benchmarking-mistral-7b-on-rtx-4090-vllm-concurrency-"
        "latency-and-capacity-planning/",
        "mistralai/Mistral-7B-Instruct-v0.3", "rtx-4090", "vllm", _sweep(256, 100, 300, {
            4: {"rps": 2.09, "ttft_mean": 63, "ttft_p50": 53, "ttft_p99": 157},
            8: {"rps": 3.78, "ttft_mean": 79, "ttft_p50": 55, "ttft_p99": 268},
            16: {"rps": 6.44, "ttft_mean": 155, "ttft_p50": 97, "ttft_p99": 503},
            32: {"rps": 9.73, "ttft_mean": 362, "ttft_p50": 277, "ttft_p99": 938},
            48: {"rps": 11.87, "ttft_mean": 667, "ttft_p50": 840, "ttft_p99": 1483}})),
    # Qwen2.5-0.5B-Instruct (BF16) on one L4, vLLM v0.23.0 (V1), `--gpu-memory-utilization 0.6
    # --max-model-len 8192`, `vllm bench serve` 256 input / 128 output tokens, --ignore-eos,
    # --request-rate inf at each --max-concurrency (number of prompts not stated: simulated
    # with vllm bench serve's default, 1,000). Published: req/s, TTFT p50/p95, ITL p50/p95,
    # E2E p50/p95 (ms); peak KV-cache usage 1.1 %, nothing waiting ("serving/raw-vllm").
    Run("Qwen2.5-0.5B, L4, vLLM 0.23", "ai.wmx.dev", "https://ai.wmx.dev/benchmarks",
        "Qwen/Qwen2.5-0.5B-Instruct", "l4", "vllm", _sweep(256, 128, 1000, {
            1: {"rps": 1.3, "ttft_p50": 27.0, "ttft_p95": 115.5, "itl_p50": 5.1,
                "e2e_p50": 679, "e2e_p95": 765},
            2: {"rps": 2.9, "ttft_p50": 37.8, "ttft_p95": 48.2, "itl_p50": 5.2,
                "e2e_p50": 698, "e2e_p95": 705},
            4: {"rps": 5.4, "ttft_p50": 50.1, "ttft_p95": 85.4, "itl_p50": 5.3,
                "e2e_p50": 722, "e2e_p95": 760},
            8: {"rps": 10.2, "ttft_p50": 60.9, "ttft_p95": 88.4, "itl_p50": 5.5,
                "e2e_p50": 772, "e2e_p95": 816},
            16: {"rps": 17.8, "ttft_p50": 103.8, "ttft_p95": 135.7, "itl_p50": 6.0,
                 "e2e_p50": 880, "e2e_p95": 947},
            32: {"rps": 29.5, "ttft_p50": 135.3, "ttft_p95": 191.8, "itl_p50": 7.1,
                 "e2e_p50": 1082, "e2e_p95": 1128}}),
        knobs={"gpu_memory_utilization": 0.6, "max_model_len": 8192}, version="0.23.0"),
)

# GPUStack performance lab (gpustack/gpustack docs/performance-lab/<model>/<gpu>.md at the commit
# in GPUSTACK_URL): one H100 SXM / A100 SXM 80GB / H200 SXM node, the engine releases each page
# states, `vllm bench serve --backend openai-chat --dataset-name random --random-input-len L
# --random-output-len O --num-prompts N --seed 42` with (L, O, N) = (32000, 100, 100),
# (4000, 200, 500), (2000, 100, 500), (128, 4, 1000). The baseline (default) serving command of
# each page, and its TensorRT-LLM alternative where the page runs one on a catalogued model.
GPUSTACK = (
    # qwen3-14b/h100: `vllm serve Qwen/Qwen3-14B`
    _gpustack("qwen3-14b/h100", "Qwen/Qwen3-14B", "h100-sxm-80gb", "vllm", "0.11.0", (
        (100, 3200000, 9855, 0.26, 191024.43, 191051.49, 380407.97, 277.44, 324.14),
        (500, 1997942, 99803, 2.2, 112716.92, 110734.54, 219749.74, 132.45, 161.93),
        (500, 998175, 50000, 5.06, 50716.13, 49138.28, 94614.51, 206.51, 236.67),
        (1000, 127698, 4000, 44.02, 18282.75, 18061.13, 22564.77, 525.31, 610.81),
    )),
    # qwen3-14b/a100: `vllm serve Qwen/Qwen3-14B`
    _gpustack("qwen3-14b/a100", "Qwen/Qwen3-14B", "a100-sxm-80gb", "vllm", "0.11.0", (
        (100, 3200000, 9891, 0.14, 359648.08, 359424.54, 714338.15, 445.58, 463.96),
        (500, 1997942, 99783, 1.23, 197625.03, 196621.85, 396056.32, 254.61, 283.5),
        (500, 998175, 50000, 2.85, 86908.3, 86575.09, 170607.65, 301.73, 334.55),
        (1000, 127698, 4000, 37.33, 19451.46, 19150.52, 26523.59, 233.35, 251.05),
    )),
    # qwen3-14b/a100: `trtllm-serve Qwen/Qwen3-14B --max_seq_len=40960 --enable_chunked_prefill`
    _gpustack("qwen3-14b/a100", "Qwen/Qwen3-14B", "a100-sxm-80gb", "trtllm", "1.2.0rc1", (
        (100, 3200000, 9932, 0.14, 361107.28, 361543.94, 716851.4, 493.18, 590.17),
        (500, 1997942, 99760, 1.53, 155664.65, 152609.98, 316584.25, 196.1, 218.23),
        (500, 998175, 50000, 3.57, 67624.26, 65786.34, 134519.75, 313.69, 365.92),
        (1000, 127698, 4000, 66.53, 8166.48, 7882.94, 14856.34, 715.19, 1028.67),
    ), knobs={"max_model_len": 40960}),
    # qwen3-32b/h100: `vllm serve Qwen/Qwen3-32B`
    _gpustack("qwen3-32b/h100", "Qwen/Qwen3-32B", "h100-sxm-80gb", "vllm", "0.11.0", (
        (100, 3200000, 7681, 0.09, 585981.22, 582757.65, 1144686.57, 43.42, 44.34),
        (500, 1997942, 99790, 0.51, 482284.21, 483375.28, 956141.26, 66.61, 100.86),
        (500, 998175, 50000, 1.52, 163909.4, 164148.38, 322980.86, 86.62, 131.41),
        (1000, 127698, 4000, 30.42, 21648.67, 21342.36, 32678.31, 1169.72, 1417.05),
    )),
    # qwen3-32b/a100: `vllm serve Qwen/Qwen3-32B`
    _gpustack("qwen3-32b/a100", "Qwen/Qwen3-32B", "a100-sxm-80gb", "vllm", "0.11.0", (
        (100, 3200000, 7699, 0.06, 890711.38, 892708.86, 1760024.36, 67.87, 147.19),
        (500, 1997942, 99893, 0.44, 566579.7, 564705.97, 1116945.95, 96.19, 99.35),
        (500, 998175, 50000, 1.2, 208397.03, 209108.79, 408103.76, 143.23, 166.03),
        (1000, 127698, 4000, 20.17, 31177.64, 31073.76, 48960.57, 528.57, 547.31),
    )),
    # qwen3-32b/a100: `trtllm-serve Qwen/Qwen3-32B --max_seq_len=40960 --enable_chunked_prefill`
    _gpustack("qwen3-32b/a100", "Qwen/Qwen3-32B", "a100-sxm-80gb", "trtllm", "1.2.0rc1", (
        (100, 3200000, 7880, 0.05, 1040855.88, 1047384.87, 2008642.88, 47.37, 47.49),
        (500, 1997942, 99874, 0.49, 509693.25, 505676.34, 1014720.64, 100.09, 115.57),
        (500, 998175, 50000, 1.3, 189776.2, 189321.8, 378730.86, 145.49, 178.5),
        (1000, 127698, 4000, 26.85, 19761.77, 19497.33, 36592.74, 1885.18, 2149.03),
    ), knobs={"max_model_len": 40960}),
    # qwen3-32b/h100: `trtllm-serve Qwen/Qwen3-32B-FP8 --max_seq_len=40960 --enable_chunked_prefill`
    _gpustack("qwen3-32b/h100", "Qwen/Qwen3-32B-FP8", "h100-sxm-80gb", "trtllm", "1.2.0rc1", (
        (100, 3200000, 7832, 0.13, 396294.9, 397717.15, 778540.06, 286.97, 581.09),
        (500, 1997942, 99888, 1.17, 208082.2, 204136.2, 415000.76, 138.75, 151.74),
        (500, 998175, 50000, 2.82, 86596.6, 86629.72, 171842.84, 223.4, 249.66),
        (1000, 127698, 4000, 51.83, 10718.84, 10511.6, 19055.52, 890.11, 1351.38),
    ), knobs={"max_model_len": 40960}),
    # gpt-oss-20b/h100: `vllm serve openai/gpt-oss-20b`
    _gpustack("gpt-oss-20b/h100", "openai/gpt-oss-20b", "h100-sxm-80gb", "vllm", "0.11.0", (
        (100, 3200000, 9350, 0.93, 53687.69, 53539.25, 105655.63, 239.44, 275.66),
        (500, 1999249, 52309, 8.1, 31245.12, 30820.97, 58702.17, 184.26, 230.22),
        (500, 999120, 47022, 15.35, 16515.86, 16363.96, 30359.34, 149.76, 225.79),
        (1000, 127755, 4000, 212.76, 3174.14, 2892.24, 4415.25, 178.91, 246.08),
    )),
    # gpt-oss-20b/a100: `vllm serve openai/gpt-oss-20b`
    _gpustack("gpt-oss-20b/a100", "openai/gpt-oss-20b", "a100-sxm-80gb", "vllm", "0.11.0", (
        (100, 3200000, 9533, 0.23, 219739.77, 219663.48, 435080.24, 268.03, 282.4),
        (500, 1999249, 53530, 3.88, 62947.13, 61941.78, 125429.94, 123.35, 131.42),
        (500, 999120, 47224, 8.61, 31669.55, 32083.12, 55891.47, 100.32, 119.71),
        (1000, 127755, 4000, 183.85, 2774.46, 1971.28, 5298.6, 62.1, 106.62),
    )),
    # gpt-oss-120b/h100: `vllm serve openai/gpt-oss-120b --max-model-len 32768`
    _gpustack("gpt-oss-120b/h100", "openai/gpt-oss-120b", "h100-sxm-80gb", "vllm", "0.10.2", (
        (100, 3200000, 9877, 0.5, 99444.04, 99439.56, 196214.22, 23.99, 31.32),
        (500, 1999249, 67205, 3.45, 72954.68, 73023.24, 141744.03, 31.7, 37.43),
        (500, 999120, 49197, 6.86, 36234.76, 35662.58, 70634.63, 41.35, 48.36),
        (1000, 127755, 4000, 129.48, 4850.46, 4987.41, 7372.98, 304.8, 360.4),
    ), knobs={"max_model_len": 32768}),
    # gpt-oss-120b/a100: `vllm serve openai/gpt-oss-120b --max-model-len 32768`
    _gpustack("gpt-oss-120b/a100", "openai/gpt-oss-120b", "a100-sxm-80gb", "vllm", "0.11.0", (
        (100, 3200000, 9988, 0.14, 368856.64, 368713.3, 730947.33, 224.58, 231.28),
        (500, 1999249, 67259, 1.86, 133561.13, 134006.62, 263106.36, 112.18, 136.26),
        (500, 999120, 48981, 4.03, 61328.02, 61764.97, 120670.44, 131.94, 150.84),
        (1000, 127755, 4000, 70.99, 7813.18, 7750.58, 13935.99, 182.75, 193.12),
    ), knobs={"max_model_len": 32768}),
    # qwen3-235b-a22b/h100: `vllm serve Qwen/Qwen3-235B-A22B-Instruct-2507 -tp 8`
    _gpustack("qwen3-235b-a22b/h100", "Qwen/Qwen3-235B-A22B-Instruct-2507", "h100-sxm-80gb",
              "vllm", "0.11.0", (
        (100, 3200000, 8191, 0.71, 70409.55, 70737.29, 138084.17, 132.1, 182.76),
        (500, 1997942, 92185, 5.05, 47811.58, 48562.54, 93161.32, 68.94, 92.94),
        (500, 998175, 49500, 11.39, 21313.79, 20242.32, 40939.0, 101.08, 125.24),
        (984, 125650, 3936, 111.38, 7042.17, 6882.45, 8721.24, 212.98, 242.28),
    ), tp=8),
    # qwen3-235b-a22b/a100: `vllm serve Qwen/Qwen3-235B-A22B-Instruct-2507 -tp 8`
    _gpustack("qwen3-235b-a22b/a100", "Qwen/Qwen3-235B-A22B-Instruct-2507", "a100-sxm-80gb",
              "vllm", "0.11.0", (
        (100, 3200000, 8191, 0.21, 240229.05, 240137.1, 475251.39, 298.86, 311.82),
        (500, 1997942, 91352, 1.96, 122190.64, 121615.01, 244882.42, 205.64, 237.8),
        (500, 998175, 49632, 4.46, 54722.5, 54532.6, 106756.03, 190.79, 209.09),
        (1000, 127698, 4000, 56.56, 12767.63, 12409.68, 17339.37, 155.16, 168.04),
    ), tp=8),
    # deepseek-r1/h200: `vllm serve deepseek-ai/DeepSeek-R1-0528 -tp 8`
    _gpustack("deepseek-r1/h200", "deepseek-ai/DeepSeek-R1", "h200-sxm-141gb", "vllm", "0.11.0", (
        (100, 3199900, 10000, 0.48, 101351.99, 101163.8, 200267.68, 365.79, 404.78),
        (500, 1997530, 100000, 3.77, 63058.71, 61952.74, 124112.96, 164.23, 195.8),
        (500, 998393, 50000, 8.44, 28911.9, 27559.21, 53497.07, 237.02, 322.76),
        (1000, 126882, 4000, 45.32, 19392.11, 18992.42, 21440.63, 351.83, 432.12),
    ), tp=8),
)

ALL_RUNS = RUNS + GPUSTACK


def _context(run: Run) -> tuple[perf.PerfContext, int, str]:
    """The latency model's context of the run's deployment as kvplan plans it (the context
    `kvplan plan` computes its figures with; kvplan calibrate replays runs so too)."""
    p, ctx = plan_with_context(run.model, run.gpu, engine=run.engine,
                               engine_version=run.version, tensor_parallel_size=run.tp,
                               **run.knobs)
    if ctx is None:
        raise SystemExit(f"{run.name}: kvplan plans no latency figures for it "
                         f"({', '.join(pr.code for pr in p.problems)})")
    g = resolve_gpu(run.gpu)
    inputs = {k: v.value for k, v in p.inputs.items()}
    block_size = int(inputs.get("block_size") or 16)
    head = (f"{run.model} on {g.name}{f' ×{run.tp}' if run.tp > 1 else ''}, {run.engine} "
            f"{p.engine.version} (max_num_seqs {ctx.max_num_seqs}, max_num_batched_tokens "
            f"{ctx.max_num_batched_tokens}, KV {p.kv_cache.tokens:,} tokens"
            + (f" printed, {p.kv_cache.pool_tokens:,} in the pool"
               if p.kv_cache.pool_tokens != p.kv_cache.tokens else "")
            + f" in blocks of {block_size}; calibrated: {ctx.calibrated}; request overhead "
            f"{ctx.coefficients.request_overhead_ms:.1f} ms; front end "
            + (f"{ctx.frontend_servers} × {ctx.frontend_service_s * 1e3:.2f} ms a request)"
               if ctx.frontend_service_s > 0 else "not modelled)"))
    if not p.fits:  # the stated command line, as kvplan plans it, would not start
        util = p.recommendations.gpu_memory_utilization.value
        head += ("\nkvplan: this command does not start as stated ("
                 + ", ".join(pr.code for pr in p.problems if pr.severity == "error")
                 + "); replayed as the plan's figures are computed: on the launch line it "
                 f"recommends (gpu_memory_utilization {util}, {ctx.kv_capacity_tokens:,} "
                 "KV tokens in the pool)")
    return ctx, block_size, head


def _predicted(res: sim.SimResult, key: str) -> float:
    if key == "rps":
        return res.requests_per_s
    metric, stat = key.split("_")
    if metric in ("itl", "tpot"):
        st = res.itl if metric == "itl" else res.tpot
        return st.mean if stat == "mean" else st.at(int(stat[1:]))
    values = sorted(res.ttft_s if metric == "ttft" else res.e2e_s)
    if stat == "mean":
        return sum(values) / len(values) * 1e3
    return sim.percentile(values, float(stat[1:])) * 1e3


POINT_ERRORS: list[tuple[str, int, str, float]] = []  # (group, prompt tokens, statistic, error)


def replay(run: Run, frontend_ms: float | None = None) -> dict[str, list[float]]:
    """Print the run's table; return the signed errors per statistic (each also recorded in
    POINT_ERRORS). frontend_ms: the front end's service time instead of the engine's
    declared one (0: none), for the engines that declare one."""
    ctx, block_size, head = _context(run)
    if frontend_ms is not None and ctx.frontend_service_s > 0:
        ctx = replace(ctx, frontend_service_s=frontend_ms * 1e-3)
    keys = list(dict.fromkeys(k for pt in run.points for k in pt.measured))
    print(f"\n### {run.name}\n\n{head}\nsource: {run.source}\n")
    print("| clients | prompts | in / out | " + " | ".join(f"{k} meas / sim" for k in keys)
          + " |")
    print("|---:|---:|---:|" + "---:|" * len(keys))
    errs: dict[str, list[float]] = {k: [] for k in keys}
    for pt in run.points:
        n = pt.prompts
        res = sim.simulate(ctx, sim.Requests((pt.input_tokens,) * n, (pt.output_tokens,) * n),
                           sim.Harness("closed", concurrency=pt.clients), block_size=block_size)
        if res.completed == 0:  # longer than the planned KV cache: the server ran it
            print(f"| {pt.clients} | {n} | {pt.input_tokens:,} / {pt.output_tokens:,} | "
                  f"not simulated: one request ({pt.input_tokens + pt.output_tokens:,} tokens) "
                  "exceeds the planned KV cache |" + " |" * (len(keys) - 1))
            continue
        cells = []
        for k in keys:
            if k not in pt.measured:
                cells.append("–")
                continue
            got = _predicted(res, k)
            errs[k].append(got / pt.measured[k] - 1)
            POINT_ERRORS.append((run.group, pt.input_tokens, k, errs[k][-1]))
            fmt = ".2f" if k == "rps" else ",.0f" if got >= 100 else ",.1f"
            cells.append(f"{pt.measured[k]:,g} / {got:{fmt}}")
        print(f"| {pt.clients} | {n} | {pt.input_tokens:,} / {pt.output_tokens:,} | "
              + " | ".join(cells) + " |")
    print()
    for k, e in errs.items():
        if e:
            print(f"{k}: median |error| {statistics.median(abs(x) for x in e):.0%}, "
                  f"median signed {statistics.median(e):+.0%} ({len(e)} points)")
    return errs


STATS = ("ttft_p99", "ttft_p95", "ttft_p50", "ttft_mean", "tpot_p99", "tpot_mean", "e2e_p95",
         "itl_p50", "rps")


def _summary(title: str, errs: dict[str, list[float]]) -> None:
    print(f"\n{title}\n")
    print("| statistic | points | median \\|error\\| | median signed |")
    print("|---|---:|---:|---:|")
    for k in STATS:
        e = errs.get(k, [])
        if e:
            print(f"| {k} | {len(e)} | {statistics.median(abs(x) for x in e):.0%} | "
                  f"{statistics.median(e):+.0%} |")


P99_TARGET = 0.30  # issue #27: p99 TTFT median error over the published runs ≤ 30 %


def headline(pooled: dict[str, list[float]]) -> str:
    """The pooled p99 TTFT figure (the README's and docs/performance.md's traffic sentence):
    median |error| and median signed error over every published p99 point, against the target."""
    e = pooled.get("ttft_p99", [])
    if not e:
        return "no p99 TTFT points"
    med = statistics.median(abs(x) for x in e)
    sources = len({g for g, _, k, _ in POINT_ERRORS if k == "ttft_p99"})
    return (f"p99 TTFT median APE {med * 100:.1f} % (target ≤ {P99_TARGET * 100:.0f} %, "
            f"{'met' if med <= P99_TARGET else 'not met'}; median signed "
            f"{statistics.median(e) * 100:+.1f} %) over {len(e)} points from {sources} sources")


HEADLINE = [""]  # main()'s headline sentence, for the generated blocks


def main() -> None:
    pooled: dict[str, list[float]] = {}
    groups: dict[str, dict[str, list[float]]] = {}
    per_run: list[tuple[Run, list[float]]] = []
    for run in ALL_RUNS:
        errs = replay(run)
        per_run.append((run, errs.get("ttft_p99") or errs.get("ttft_p95") or []))
        for k, e in errs.items():
            pooled.setdefault(k, []).extend(e)
            groups.setdefault(run.group, {}).setdefault(k, []).extend(e)
    print("\n### Tail TTFT by run (p99; p95 where the run publishes no p99)\n")
    print("| run | source | points | median \\|error\\| | median signed |")
    print("|---|---|---:|---:|---:|")
    for run, e in per_run:
        if e:
            print(f"| {run.name} | {run.group} | {len(e)} | "
                  f"{statistics.median(abs(x) for x in e):.0%} | {statistics.median(e):+.0%} |")
    print("\n### GPUStack bursts by prompt length (median signed error)\n")
    print("| prompt tokens | points | p99 TTFT | requests/s |")
    print("|---:|---:|---:|---:|")
    for lo, hi in ((100, 200), (1900, 2100), (3900, 4100), (30000, 33000)):
        sel = [(k, e) for g, i, k, e in POINT_ERRORS
               if g == "GPUStack performance lab" and lo <= i <= hi]
        p99 = [e for k, e in sel if k == "ttft_p99"]
        rps = [e for k, e in sel if k == "rps"]
        if p99:
            print(f"| {lo:,}–{hi:,} | {len(p99)} | {statistics.median(p99):+.0%} | "
                  f"{statistics.median(rps):+.0%} |")
    print("\n### Errors by source")
    for g, errs in groups.items():
        _summary(f"**{g}**", errs)
    _summary("**All sources pooled**", pooled)
    HEADLINE[0] = headline(pooled)
    frontend_section()


def _fronted(run: Run) -> bool:
    """Whether kvplan models a front-end queue for the run's engine."""
    return registry.get(run.engine).calibration.frontend_service_ms > 0


def frontend_fit(runs: tuple[Run, ...]) -> float:
    """The one fitted constant (ms): the largest front-end service time no run contradicts,
    1 / the highest requests/s measured through an engine with a modelled front end (a
    single API server cannot pass more)."""
    return 1e3 / max(pt.measured["rps"] for r in runs if _fronted(r) for pt in r.points)


def _quiet_errors(runs: tuple[Run, ...], frontend_ms: float | None) -> list[
        tuple[str, int, str, float]]:
    """POINT_ERRORS of `runs` replayed with that front end, their tables not printed."""
    import contextlib
    import io

    saved = list(POINT_ERRORS)
    POINT_ERRORS.clear()
    with contextlib.redirect_stdout(io.StringIO()):
        for run in runs:
            replay(run, frontend_ms)
    out = list(POINT_ERRORS)
    POINT_ERRORS[:] = saved
    return out


def _cell(errs: list[tuple[str, int, str, float]], group: str | None, keys: tuple[str, ...]
          ) -> str:
    for k in keys:  # the first statistic the points publish
        e = [x for g, _, kk, x in errs if kk == k and group in (None, g)]
        if e:
            return (f"{statistics.median(abs(x) for x in e):.0%} "
                    f"({statistics.median(e):+.0%}, {len(e)})")
    return "–"


def frontend_section() -> None:
    """Errors without the front-end queue, with it (the declared constant) and held out
    (the constant fitted without the point's source), per source and pooled."""
    groups = list(dict.fromkeys(r.group for r in ALL_RUNS))
    declared = {r.engine: registry.get(r.engine).calibration.frontend_service_ms
                for r in ALL_RUNS if _fronted(r)}
    off = _quiet_errors(ALL_RUNS, 0.0)
    on = list(POINT_ERRORS)
    held: list[tuple[str, int, str, float]] = []
    fits = {}
    for g in groups:
        fits[g] = frontend_fit(tuple(r for r in ALL_RUNS if r.group != g))
        held += _quiet_errors(tuple(r for r in ALL_RUNS if r.group == g), fits[g])
    print("\n### The serving front end (docs/traffic.md)\n")
    print(f"Declared: {', '.join(f'{e} {v:.2f} ms' for e, v in declared.items())} a request, one "
          f"server; fitted on all sources: {frontend_fit(ALL_RUNS):.2f} ms. Held out: the "
          "constant fitted without the point's source ("
          + ", ".join(f"without {g}: {v:.2f} ms" for g, v in fits.items()) + ").\n")
    print("Median |error| (median signed, points): without the front end / with it / held out\n")
    print("| source | statistic | without | with | held out |")
    print("|---|---|---:|---:|---:|")
    tail = ("ttft_p99", "ttft_p95")
    for g in [*groups, None]:
        for name, keys in (("tail TTFT (p99; p95)", tail), ("p50 TTFT", ("ttft_p50",)),
                           ("TPOT mean", ("tpot_mean",)), ("requests/s", ("rps",))):
            cells = [_cell(e, g, keys) for e in (off, on, held)]
            if cells[0] != "–":
                print(f"| {g or '**pooled**'} | {name} | " + " | ".join(cells) + " |")
    print("\n| GPUStack prompt tokens | p99 TTFT without / with | requests/s without / with |")
    print("|---:|---:|---:|")
    for lo, hi in ((100, 200), (1900, 2100), (3900, 4100), (30000, 33000)):
        def med(errs: list[tuple[str, int, str, float]], k: str,
                lo: int = lo, hi: int = hi) -> str:
            e = [x for g, i, kk, x in errs if g == "GPUStack performance lab" and kk == k
                 and lo <= i <= hi]
            return f"{statistics.median(e):+.0%}" if e else "–"
        print(f"| {lo:,}–{hi:,} | {med(off, 'ttft_p99')} / {med(on, 'ttft_p99')} | "
              f"{med(off, 'rps')} / {med(on, 'rps')} |")


DOC = Path(__file__).resolve().parent.parent / "docs" / "traffic-validation.md"
HEADER = ("# Percentiles against published runs: every point\n\n"
          "<!-- generated by benchmarks/traffic_validation.py --write; do not edit by hand -->\n\n"
          "Each run as kvplan plans and simulates it (measured / simulated); how the runs were "
          "chosen, what the errors mean and the mechanisms behind them: "
          "[traffic.md](traffic.md#validation-against-published-runs-benchmarkstraffic_validationpy).\n")


def page() -> str:
    """The generated page: the header and everything main() prints."""
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        main()
    return HEADER + buf.getvalue()


ROOT = DOC.parent.parent
# the headline's blocks: README.md and docs/performance.md (perf_fit.py keeps the latter's)
BLOCKS = (ROOT / "README.md", ROOT / "docs" / "performance.md")
START, END = "<!-- traffic:start -->", "<!-- traffic:end -->"


def with_headline(text: str) -> str:
    """`text` with the sentence between its traffic markers replaced by HEADLINE (unchanged
    without the markers)."""
    if START not in text:
        return text
    head, rest = text.split(START, 1)
    return f"{head}{START}{HEADLINE[0]}{END}" + rest.split(END, 1)[1]


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        DOC.write_text(page(), encoding="utf-8")
        for path in BLOCKS:
            path.write_text(with_headline(path.read_text(encoding="utf-8")), encoding="utf-8")
    elif "--check" in sys.argv[1:]:
        stale = [] if DOC.read_text(encoding="utf-8") == page() else [DOC]
        stale += [p for p in BLOCKS
                  if p.read_text(encoding="utf-8") != with_headline(p.read_text(encoding="utf-8"))]
        if stale:
            print(", ".join(str(p.relative_to(ROOT)) for p in stale) + " stale: run "
                  "python benchmarks/traffic_validation.py --write")
            sys.exit(1)
    else:
        main()
