"""Predicted throughput per GPU of public disaggregated prefill/decode deployments, against the
published figures (docs/disagg.md, "Validation"). Prints the Markdown table and the median
error.

    python benchmarks/disagg_validation.py

Each row is planned with `kvplan plan --disagg` at the published layout: expert parallelism
with DP attention over every GPU of a pool (kvplan -tp 1 -dp N --enable-expert-parallel: SGLang
`--tp-size N --dp-size N --enable-dp-attention --ep-size N`), DeepEP, 32 redundant experts,
each pool across the nodes it needs. Prefill: prompt tokens per second per GPU of one prefill
replica in full batches (disaggregated.prefill_tokens_per_s_per_replica ÷ its GPUs; with a
prefix-cache hit rate, input tokens counting the hits as the source does). Decode: output
tokens per second per GPU of one decode replica at the requests it holds
(decode_running_per_replica ÷ TPOT ÷ its GPUs), with enough prefill replicas that decode binds.
Published figures are per node of 8 GPUs, divided by 8:
* DeepSeek, "DeepSeek-V3/R1 Inference System Overview" (github.com/deepseek-ai/open-infra-index,
  202502OpenSourceWeek/day_6_one_more_thing_deepseekV3R1_inference_system_overview.md):
  73.7k input tokens/s per H800 node in prefill, cache hits included (56.3 % of input tokens
  hit the on-disk KV cache: 342B of 608B); 14.8k output tokens/s per node in decode; prefill
  EP32 / DP32 over 4 nodes, decode EP144 / DP144 over 18 nodes, 32 redundant experts, MTP
  (planned as SGLang NEXTN with one draft token at kvplan's default acceptance for MTP, 0.85).
  Lengths: the decode batch is 128 requests per GPU at a mean KV length of 4,989 (the figures
  SGLang's blog tabulates for DeepSeek's blog); with the daily 608B input : 168B output ratio
  (3.62), input + output / 2 = 4,989 gives 4,380 + 1,210.
* SGLang, "Deploying DeepSeek with PD Disaggregation and Large-scale Expert Parallelism on 96
  H100 GPUs" (lmsys.org/blog/2025-05-05-large-scale-ep): 52.3k input and 22.3k output tokens/s
  per node for 2,000-token inputs; prefill EP32 on 4 nodes at 16,384 tokens per device, decode
  EP72 on 9 nodes at 256 requests per device (KV length 2,000), DP attention, DeepEP, two-batch
  overlap. The prefill launch line's settings follow the recipe of sgl-project/sglang#6017 as
  quoted in sglang#9787 (--chunked-prefill-size 524288, --max-running-requests 8192,
  --mem-fraction-static 0.835).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's kvplan, not an installed one

from kvplan.api import plan_disagg  # noqa: E402
from kvplan.specs import Workload  # noqa: E402

R1 = "deepseek-ai/DeepSeek-R1"
# --moe-dense-tp-size 1: the wide-EP launch lines of the recipe both rows follow
# (sgl-project/sglang#6017 and #7998: "--enable-dp-attention ... --moe-dense-tp-size 1
# --enable-dp-lm-head") run DeepSeek's 3 dense layers' MLP whole on every GPU
SHARED = {"moe_a2a_backend": "deepep", "num_redundant_experts": 32,
          "gpu_memory_utilization": 0.835, "moe_dense_tp_size": 1}
# DeepSeek-V3's one MTP module, one draft token a step (SGLang NEXTN); its acceptance is kvplan's
# published default for MTP, 0.85 (DeepSeek-V3 technical report §5.4.3: 85–90 %)
MTP = {"speculative_config": {"method": "mtp", "num_speculative_tokens": 1}}
# (source, GPU, engine, input, output, prefix-cache hit rate, prefill EP, decode EP,
#  prefill options, decode options, layout note, published prefill / decode tok/s per GPU)
ROWS: tuple[tuple[Any, ...], ...] = (
    ("DeepSeek inference-system overview", "h800", "sglang", 4380, 1210, 0.563, 32, 144,
     {"max_num_batched_tokens": 32 * 16384, **MTP}, {"max_num_seqs": 128, **MTP},
     "EP32 / EP144, DP attention, DeepEP, MTP (published: DeepSeek's own engine, + TBO)",
     73_700 / 8, 14_800 / 8),
    ("SGLang large-scale EP blog, 96 H100", "h100", "sglang", 2000, 100, None, 32, 72,
     {"max_num_batched_tokens": 524288, "max_num_seqs": 8192 // 32}, {"max_num_seqs": 256},
     "EP32 / EP72, DP attention, DeepEP (published: + TBO)",
     52_300 / 8, 22_300 / 8),
)


def predict(row: tuple[Any, ...]) -> tuple[float, float]:
    """(prefill, decode) tokens/s per GPU kvplan predicts for the row's pools."""
    _, gpu, engine, i, o, hit, p_ep, d_ep, p_opts, d_opts = row[:10]
    layout: dict[str, Any] = dict(prefill_ep=p_ep, prefill_dp=p_ep, decode_ep=d_ep,
                                  decode_dp=d_ep, prefill_options=p_opts, decode_options=d_opts,
                                  **SHARED)
    w = {"avg_input_tokens": i, "avg_output_tokens": o, "prefix_hit_rate": hit}
    probe = plan_disagg(R1, gpu, engine=engine, prefill_replicas=1, decode_replicas=1,
                        workload=Workload(**w), **layout)
    cap = probe.disaggregated.decode_capacity_per_replica
    r = plan_disagg(R1, gpu, engine=engine, prefill_replicas=64, decode_replicas=1,
                    workload=Workload(**w, target_concurrency=max(1, cap)), **layout)
    d = r.disaggregated
    assert r.performance is not None, r.problems
    computed = d.prefill_tokens_per_s_per_replica / d.prefill.gpu.count
    cached = r.performance.cached_tokens
    prefill = computed * i / (i - cached)  # the cache hits count as input, as published
    decode = d.decode_running_per_replica * 1e3 / r.performance.tpot_ms / d.decode.gpu.count
    return prefill, decode


def table() -> tuple[list[str], float]:
    """The Markdown table docs/disagg.md shows, and the median |error|."""
    lines = ["| source | phase | GPU | published tok/s/GPU | kvplan tok/s/GPU | error | layout "
             "planned |", "|---|---|---|--:|--:|--:|---|"]
    errors = []
    for row in ROWS:
        source, gpu, i, o, layout, pub_p, pub_d = (row[0], row[1], row[3], row[4], row[10],
                                                   row[11], row[12])
        pred_p, pred_d = predict(row)
        for phase, pub, pred in (("prefill", pub_p, pred_p), ("decode", pub_d, pred_d)):
            err = pred / pub - 1
            errors.append(abs(err))
            lines.append(f"| {source} | {phase} ({i}+{o}) | {gpu} | {pub:,.0f} | {pred:,.0f} | "
                         f"{err:+.0%} | {layout} |")
    return lines, statistics.median(errors)


def main() -> None:
    lines, median = table()
    print("\n".join(lines))
    print(f"\nmedian |error|: {median:.0%} over {len(lines) - 2} figures")


if __name__ == "__main__":
    main()
