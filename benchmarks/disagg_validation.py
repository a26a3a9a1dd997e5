"""Predicted throughput per GPU of public disaggregated prefill/decode deployments, against the
published figures (docs/disagg.md, "Validation"). Prints the Markdown table and the median
error.

    python benchmarks/disagg_validation.py

Each row is planned with `kvplan plan --disagg` as close to the published layout as kvplan can
plan today (the layout column says what differs). Prefill: prompt tokens per second per GPU of
one prefill replica in full batches (disaggregated.prefill_tokens_per_s_per_replica ÷ its GPUs).
Decode: output tokens per second per GPU of one decode replica at the requests it holds
(decode_running_per_replica ÷ TPOT ÷ its GPUs), with enough prefill replicas that decode binds.
Published figures (per node of 8 GPUs, divided by 8):
* DeepSeek, "DeepSeek-V3/R1 Inference System Overview" (github.com/deepseek-ai/open-infra-index,
  202502OpenSourceWeek/day_6_one_more_thing_deepseekV3R1_inference_system_overview.md):
  73.7k input tokens/s per H800 node in prefill (cache hits included), 14.8k output tokens/s per
  node in decode; prefill EP32/DP32, decode EP144/DP144, MTP. Prompt/output lengths are not
  published: 608B input / 168B output tokens a day (ratio 3.6) → 1,800 + 500 assumed.
* SGLang, "Deploying DeepSeek with PD Disaggregation and Large-scale Expert Parallelism on 96
  H100 GPUs" (lmsys.org/blog/2025-05-05-large-scale-ep): 52.3k input and 22.3k output tokens/s
  per node for 2,000-token inputs (prefill EP32, decode EP72, DP attention, DeepEP, TBO).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's kvplan, not an installed one

from kvplan.api import plan_disagg  # noqa: E402
from kvplan.specs import Workload  # noqa: E402

R1 = "deepseek-ai/DeepSeek-R1"
# (source, GPU, engine, input, output, layout kvplan plans, what differs,
#  published prefill tokens/s per GPU, published decode tokens/s per GPU)
ROWS = (
    ("DeepSeek inference-system overview", "h800", "sglang", 1800, 500, 16,
     "TP16 pools (published: EP32 prefill, EP144 decode, DP attention, MTP)",
     73_700 / 8, 14_800 / 8),
    ("SGLang large-scale EP blog, 96 H100", "h100", "sglang", 2000, 100, 16,
     "TP16 pools (published: EP32 prefill, EP72 decode, DP attention, DeepEP, TBO)",
     52_300 / 8, 22_300 / 8),
)


def predict(gpu: str, engine: str, i: int, o: int, tp: int) -> tuple[float, float]:
    """(prefill, decode) tokens/s per GPU kvplan predicts for the pools at TP `tp`."""
    probe = plan_disagg(R1, gpu, engine=engine, prefill_tp=tp, decode_tp=tp, prefill_replicas=1,
                        decode_replicas=1, workload=Workload(avg_input_tokens=i,
                                                             avg_output_tokens=o))
    d = probe.disaggregated
    cap = d.decode_capacity_per_replica
    r = plan_disagg(R1, gpu, engine=engine, prefill_tp=tp, decode_tp=tp, prefill_replicas=64,
                    decode_replicas=1, workload=Workload(avg_input_tokens=i, avg_output_tokens=o,
                                                         target_concurrency=max(1, cap)))
    d = r.disaggregated
    assert r.performance is not None
    prefill = d.prefill_tokens_per_s_per_replica / d.prefill.gpu.count
    decode = d.decode_running_per_replica * 1e3 / r.performance.tpot_ms / d.decode.gpu.count
    return prefill, decode


def table() -> tuple[list[str], float]:
    """The Markdown table docs/disagg.md shows, and the median |error|."""
    lines = ["| source | phase | GPU | published tok/s/GPU | kvplan tok/s/GPU | error | layout "
             "planned |", "|---|---|---|--:|--:|--:|---|"]
    errors = []
    for source, gpu, engine, i, o, tp, layout, pub_p, pub_d in ROWS:
        pred_p, pred_d = predict(gpu, engine, i, o, tp)
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
